"""What the OS sandbox adds to starting a command, and what parsing a command for its paths costs.
Prints JSON.

- `start_ms_*`: `bash -c true` through `run_process_group`, start to exit, unsandboxed; in the local
  user's sandbox (host tree read-only); in a confined tenant's (system directories only); with the
  prlimit limits on top. Median and p95 over `--runs` runs.
- `parse_us_*`: `referenced_paths` (tree-sitter-bash) on a short and on a long command line.

Usage: python bench/sandbox.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from agentforge.tools.process import run_process_group
from agentforge.tools.sandbox import (
    NO_SANDBOX,
    CommandSandbox,
    Limits,
    Sandbox,
    View,
    locate_bwrap,
    locate_prlimit,
)
from agentforge.tools.shell_paths import referenced_paths

SHORT = "cat < /etc/passwd | head -1 > out.txt"
LONG = " && ".join(f"x{i}=/srv/{i}; grep -r pattern $x{i}/src > build/{i}.log 2>&1" for i in range(40))


async def _ignore(_chunk: bytes) -> None:
    return None


async def start_times(jail: CommandSandbox, cwd: Path, runs: int) -> list[float]:
    times: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        await run_process_group(
            ["bash", "-c", "true"],
            cwd=cwd,
            env=dict(os.environ),
            time_limit=30,
            abort=asyncio.Event(),
            on_output=_ignore,
            sandbox=jail,
        )
        times.append((time.perf_counter() - started) * 1000)
    return times


def summary(values: list[float], digits: int = 2) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), digits),
        "p95": round(ordered[int(len(ordered) * 0.95) - 1], digits),
    }


def parse_times(command: str, runs: int) -> list[float]:
    times: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        referenced_paths(command)
        times.append((time.perf_counter() - started) * 1_000_000)
    return times


async def main(runs: int) -> dict[str, Any]:
    bwrap, prlimit = locate_bwrap(None), locate_prlimit()
    with tempfile.TemporaryDirectory() as scratch:
        workspace = await asyncio.to_thread(Path(scratch).resolve)

        def jail(host: bool, limits: Limits | None = None) -> CommandSandbox:
            view = View(host=host, writable=(workspace,))
            box = Sandbox(kind="bwrap", view=view, bwrap=bwrap, prlimit=prlimit, limits=limits or Limits())
            return box.command(network=False)

        limits = Limits(cpu_seconds=600, memory_bytes=4 << 30, processes=512, file_size_bytes=1 << 30)
        results: dict[str, Any] = {
            "python": platform.python_version(),
            "kernel": platform.release(),
            "bwrap": str(bwrap),
            "runs": runs,
            "start_ms_unsandboxed": summary(await start_times(NO_SANDBOX, workspace, runs)),
            "start_ms_local_user": summary(await start_times(jail(True), workspace, runs)),
            "start_ms_confined": summary(await start_times(jail(False), workspace, runs)),
            "start_ms_confined_with_limits": summary(await start_times(jail(False, limits), workspace, runs)),
        }
    results["parse_us_short"] = summary(parse_times(SHORT, runs * 10), 1)
    results["parse_us_long"] = summary(parse_times(LONG, runs * 10), 1)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    print(orjson.dumps(asyncio.run(main(parser.parse_args().runs)), option=orjson.OPT_INDENT_2).decode())
