"""What the file snapshots behind revert cost (snapshot/repo.py). Prints JSON.

A work tree of `--files` text files (spread over directories, a few KiB each) is tracked:
- `first_track_ms`: the first snapshot of the tree (every file hashed into the object store);
- `track_ms_*`: later snapshots with nothing changed (what a step with a file-changing tool pays
  before it runs; a step that only reads or talks pays nothing);
- `changed_ms_*`: what one step pays at its end to find the files it changed (one file here);
- `restore_ms_*`: putting that file back, as a revert does.
Each later measurement is repeated `--rounds` times: the median is what to expect, the best what
the code costs when nothing else competes for the CPU.

Usage: python bench/snapshots.py [--files N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from agentforge.snapshot.repo import SnapshotRepo

FILES_PER_DIRECTORY = 50
LINE = "x = 'a line of a source file that is neither short nor long'\n"


def _make_tree(root: Path, files: int) -> None:
    for index in range(files):
        directory = root / f"pkg{index // FILES_PER_DIRECTORY}"
        directory.mkdir(exist_ok=True)
        (directory / f"module{index}.py").write_text(LINE * 50)


def _timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def _summary(name: str, values: list[float]) -> dict[str, float]:
    return {f"{name}_median": round(statistics.median(values), 2), f"{name}_best": round(min(values), 2)}


def run(files: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch) / "workspace"
        work.mkdir()
        _make_tree(work, files)
        repo = SnapshotRepo(Path(scratch) / "data" / "snapshots" / "bench", work)
        start = time.perf_counter()
        first = repo.track()
        first_ms = (time.perf_counter() - start) * 1000
        tracks = [_timed(repo.track) for _ in range(rounds)]
        target = work / "pkg0" / "module0.py"
        changed, restored = [], []
        for round_ in range(rounds):
            target.write_text(LINE * 50 + f"# round {round_}\n")
            changed.append(_timed(lambda: repo.changed(first)))
            restored.append(_timed(lambda: repo.restore(first, ["pkg0/module0.py"])))
        return {
            "files": files,
            "rounds": rounds,
            "first_track_ms": round(first_ms, 2),
            **_summary("track_ms", tracks),
            **_summary("changed_ms", changed),
            **_summary("restore_ms", restored),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print(orjson.dumps(run(args.files, args.rounds), option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
