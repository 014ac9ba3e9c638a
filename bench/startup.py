"""How long a user waits after Enter: the CLI as a fresh process, as people run it. Prints JSON.

- `run_first_token_s`: `agentforge run "hello"` in-process (the server starts inside the CLI) against
  the fake OpenAI provider, from spawning the process to the first byte of the answer on stdout.
  `*_cold` on a new data directory (the database is created and migrated), the others on one that
  already exists (every later run).
- `serve_ready_s`: `agentforge serve --port 0` from spawning to `GET /global/health` answering;
  `serve_rss_mb`: the server's resident memory then, `serve_rss_settled_mb` two seconds later (a
  start-up audit checkpoint the server signs itself loads its signing library meanwhile). On a
  database that exists (a restart); `serve_*_first` on a new one each time (a first start: the
  database is created and migrated, the first checkpoint signed).
- `help_s`: `agentforge --help` to exit (what every command pays before its own work).
- `import_server_s`: importing the server stack alone, and whether any provider SDK came with it.
Medians (and the slowest run) over `--runs` runs; the machine's load average is recorded beside them
since these are wall-clock figures, with `*_cpu_s`: the CPU time (user + system) the process had used
at that moment (with a first start's preparing child's), which a loaded machine stretches far less
than wall-clock time.

The processes run as a user's do: with bytecode caching (a `PYTHONDONTWRITEBYTECODE` in the bench's
environment is dropped for them) and after one unmeasured warm-up run.

With `--label NAME`, the figures are also kept under NAME in `--out`/startup.json (other labels stay:
"before" and "after" of a change, say) and `--out`/startup.png charts every label kept.

With `--server-src PATH`, the CLI and server run from another source tree (put first on their
`PYTHONPATH`), measured by this script: `git worktree add --detach /tmp/old <commit>`, then
`--server-src /tmp/old/src` compares two commits.

Usage: python bench/startup.py [--runs N] [--server-src PATH] [--label NAME [--out docs/bench]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.harness import fake_provider_config
from tests.fakes.openai_server import FakeOpenAI, reply

SERVER_SRC: str | None = None  # --server-src: the source tree the measured processes run
LISTENING = re.compile(rb"listening on (http://\S+)")
IMPORT_PROBE = (
    "import sys, time, json; t = time.perf_counter(); import agentforge.server.app; "
    "print(json.dumps([time.perf_counter() - t, "
    "[m for m in ('anthropic', 'openai', 'google.genai') if m in sys.modules]]))"
)


def _env(home: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AGENTFORGE_") and key != "PYTHONDONTWRITEBYTECODE"
    }
    env["XDG_CONFIG_HOME"] = str(home / "xdg")
    if SERVER_SRC:
        env["PYTHONPATH"] = os.pathsep.join([SERVER_SRC, *filter(None, [env.get("PYTHONPATH")])])
    return env


async def _cli(*args: str, cwd: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentforge.cli",
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


CPU: list[float] = []  # CPU seconds each measured process had used when it was ready
RSS: list[float] = []  # MB resident in each served process once it answered
RSS_SETTLED: list[float] = []  # and SETTLE_SECONDS later
SETTLE_SECONDS = 2.0


def _cpu_seconds(pid: int) -> float:
    """user + system time of a running process so far, with that of the children it has waited for
    (a first start's preparing child) (Linux: /proc/PID/stat, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def first_token(fake: FakeOpenAI, home: Path, data_dir: Path) -> float:
    fake.enqueue(reply("hello back"))
    started = time.perf_counter()
    process = await _cli(
        "run", "hello", "--config", str(home / "agentforge.json"), "--data-dir", str(data_dir),
        cwd=home, env=_env(home),
    )  # fmt: skip
    assert process.stdout is not None
    first = await process.stdout.read(1)
    elapsed = time.perf_counter() - started
    CPU.append(_cpu_seconds(process.pid))
    _rest, err = await process.communicate()
    if not first or process.returncode != 0:
        raise RuntimeError(f"run failed ({process.returncode}): {err.decode()[-500:]}")
    return elapsed


async def serve_ready(home: Path, data_dir: Path) -> float:
    started = time.perf_counter()
    process = await _cli("serve", "--port", "0", "--data-dir", str(data_dir), cwd=home, env=_env(home))
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 120)
        match = LISTENING.search(line)
        if match is None:
            raise RuntimeError(f"serve did not start: {line!r}")
        async with httpx2.AsyncClient(base_url=match.group(1).decode()) as client:
            (await client.get("/global/health")).raise_for_status()
        elapsed = time.perf_counter() - started
        CPU.append(_cpu_seconds(process.pid))
        RSS.append(_rss_mb(process.pid))
        await asyncio.sleep(SETTLE_SECONDS)
        RSS_SETTLED.append(_rss_mb(process.pid))
        return elapsed
    finally:
        process.terminate()
        await process.wait()


async def help_time(home: Path) -> float:
    started = time.perf_counter()
    process = await _cli("--help", cwd=home, env=_env(home))
    await process.communicate()
    return time.perf_counter() - started


async def import_server(home: Path) -> tuple[float, list[str]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", IMPORT_PROBE, stdout=asyncio.subprocess.PIPE, env=_env(home)
    )
    out, _ = await process.communicate()
    seconds, sdks = json.loads(out)
    return float(seconds), list(sdks)


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}


async def main(runs: int) -> dict[str, Any]:
    async with FakeOpenAI() as fake:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            (home / "agentforge.json").write_text(json.dumps(fake_provider_config(fake)))
            await first_token(fake, home, home / "warm-up")  # bytecode written, as after any first run
            cold = [await first_token(fake, home, home / f"cold{i}") for i in range(runs)]
            cold_cpu = CPU[-runs:]
            warm = [await first_token(fake, home, home / "warm") for _ in range(runs + 1)][1:]
            warm_cpu = CPU[-runs:]
            serve = [await serve_ready(home, home / "serve") for _ in range(runs + 1)][1:]
            serve_cpu = CPU[-runs:]
            serve_rss, serve_rss_settled = RSS[-runs:], RSS_SETTLED[-runs:]
            first = [await serve_ready(home, home / f"serve-first{i}") for i in range(runs)]
            first_cpu = CPU[-runs:]
            first_rss, first_rss_settled = RSS[-runs:], RSS_SETTLED[-runs:]
            helps = [await help_time(home) for _ in range(runs)]
            imports = [await import_server(home) for _ in range(runs)]
    return {
        "runs": runs,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "run_first_token_s": summary(warm),
        "run_first_token_cpu_s": summary(warm_cpu),
        "run_first_token_s_cold": summary(cold),
        "run_first_token_cpu_s_cold": summary(cold_cpu),
        "serve_ready_s": summary(serve),
        "serve_process_cpu_s": summary(serve_cpu),
        "serve_rss_mb": summary(serve_rss),
        "serve_rss_settled_mb": summary(serve_rss_settled),
        "serve_ready_s_first": summary(first),
        "serve_process_cpu_s_first": summary(first_cpu),
        "serve_rss_mb_first": summary(first_rss),
        "serve_rss_settled_mb_first": summary(first_rss_settled),
        "help_s": summary(helps),
        "import_server_s": summary([seconds for seconds, _ in imports]),
        "provider_sdks_imported_at_start": sorted({sdk for _, sdks in imports for sdk in sdks}),
    }


# What the chart shows, with the goal of each (1.5 s to ready or to the first token, 100 MB).
CHARTED = (
    ("run_first_token_s", "run: first token (s)", 1.5),
    ("run_first_token_cpu_s", "run: CPU to first token (s)", 1.5),
    ("serve_ready_s", "serve: ready (s)", 1.5),
    ("serve_process_cpu_s", "serve: CPU to ready (s)", 1.5),
    ("help_s", "--help (s)", None),
    ("serve_rss_mb", "serve: RSS when ready (MB)", 100.0),
    ("serve_rss_settled_mb", "serve: RSS 2 s later (MB)", 100.0),
    ("serve_ready_s_first", "serve, first start: ready (s)", 1.5),
    ("serve_rss_settled_mb_first", "serve, first start: RSS 2 s later (MB)", 100.0),
)


def record(result: dict[str, Any], label: str, out: Path) -> None:
    """Keeps `result` under `label` in out/startup.json beside the other labels, redraws the chart."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "startup.json"
    kept: dict[str, Any] = orjson.loads(path.read_bytes()) if path.exists() else {}
    kept[label] = result
    path.write_bytes(orjson.dumps(kept, option=orjson.OPT_INDENT_2))
    draw(kept, out / "startup.png")


def draw(kept: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(kept)
    columns = (len(CHARTED) + 1) // 2
    fig, grid = plt.subplots(2, columns, figsize=(3.2 * columns, 7))
    axes = list(grid.flat)
    for extra in axes[len(CHARTED) :]:
        extra.axis("off")
    for ax, (key, title, goal) in zip(axes, CHARTED, strict=False):
        medians = [kept[label].get(key, {}).get("median", 0.0) for label in labels]
        worst = [kept[label].get(key, {}).get("max", 0.0) for label in labels]
        bars = ax.bar(labels, medians, color=[f"C{i}" for i in range(len(labels))])
        ax.scatter(labels, worst, color="black", marker="_", s=200, label="slowest run")
        ax.bar_label(bars, fmt="%.2f" if goal != 100.0 else "%.0f", fontsize=8)
        if goal is not None:
            ax.axhline(goal, color="red", linestyle="--", linewidth=1, label="goal")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    loads = ", ".join(f"{label}: load {kept[label]['load_average_1m']}" for label in labels)
    last = kept[labels[-1]]
    fig.suptitle(f"Start-up, medians of {last['runs']} runs on {last['cpus']} CPUs ({loads})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--label", help="keep the figures under this name in --out and chart them")
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    parser.add_argument("--server-src", type=Path, help="run the CLI from this source tree")
    args = parser.parse_args()
    if args.server_src is not None:
        SERVER_SRC = str(args.server_src.resolve())
    result = asyncio.run(main(args.runs))
    if args.label:
        record(result, args.label, args.out)
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
