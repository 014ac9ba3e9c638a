"""Two versions of the server side by side: turns alternate between them, so drift hits both. Prints JSON.

    python bench/compare.py A B [--rounds 16] [--block 5] [--kind plain|tool|async] [--session-turns 40]
                                [--db postgresql://…] [--json OUT.json]

A and B are source trees (`src` directories, e.g. of `git worktree add --detach /tmp/old <commit>`;
`-` is this checkout's), optionally followed by `,NAME=VALUE` environment settings for that server
(`/tmp/old/src,AGENTFORGE_X=1`) and `,python=PATH`: the interpreter to serve it with (another
virtualenv, when the two differ in their dependencies). Both are served at once by `agentforge
serve` (SQLite in a temporary directory each, or a fresh Postgres schema each with `--db`) against
one fake OpenAI provider, and driven by one client: each round runs `--block` turns on one server,
then `--block` on the other (which goes first alternates), each server idle (bench/turns.py
`settle`) before its block.

Why: this machine's speed drifts by 1.5-2x within minutes, so two versions measured one after the
other (bench/turns.py `--server-src`) differ by more than most changes do. Here both see the same
drift, and each round gives one paired difference (B's median minus A's) per figure; the result is
the median of those differences with their interquartile range. Figures, per turn:
- `first_delta_ms` (plain turns): POST sent -> first `message.part.delta` over SSE;
- `turn_ms`: POST sent -> response (a plain reply, or a tool turn: `read` once, then the answer);
  `--kind async`: a plain turn through `prompt_async` (answered once queued), its first delta, and
  its `session.idle` as the turn's end;
- `cpu_ms` / `main_cpu_ms`: the server's CPU time over the block (all threads / the event loop's),
  read from /proc with nanosecond resolution (psutil's is 10 ms);
- `first_delta_best_ms` / `turn_best_ms` (differences only): the fastest turn of each block, which
  other load on the machine disturbs less than the median.
Two copies of the same tree give differences around 0 (an A/A run): their spread is the noise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, os.environ.get("BENCH_REPO", str(Path(__file__).resolve().parents[1])))

from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import FakeOpenAI, call, reply

from bench.turns import PLAIN_TEXT, ServerTree, database, settle, start_server

FIGURES = ("first_delta_ms", "turn_ms", "cpu_ms", "main_cpu_ms")
# The latencies again, each block's fastest turn: other load on the machine only ever adds delay, so
# under load the fastest of a few turns tracks the server's own cost more closely than the median.
BEST = ("first_delta_best_ms", "turn_best_ms")


@dataclass(frozen=True, slots=True)
class Side:
    """One version: "A" or "B", and which server to run."""

    name: str
    tree: ServerTree


@dataclass
class Served:
    side: Side
    live: LiveServer
    pid: int
    session_id: str = ""
    events: EventCollector | None = None
    turns: int = 0
    samples: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in FIGURES})


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time of the process's threads and of its main thread, from each thread's schedstat (ns)."""
    total = main = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                ran = int(stat.read().split()[0])
        except OSError:
            continue  # a thread that ended meanwhile
        total += ran
        if int(tid) == pid:
            main = ran
    return total / 1e9, main / 1e9


@contextlib.asynccontextmanager
async def serve(side: Side, tmp: Path, fake: FakeOpenAI, database_url: str | None) -> AsyncIterator[Served]:
    process, live, client = await start_server(side.tree, tmp, fake, database_url, start_timeout=60.0)
    try:
        async with client:
            yield Served(side, live, process.pid)
    finally:
        process.terminate()
        await process.wait()


async def new_session(served: Served) -> None:
    if served.events is not None:
        await served.events.stop()
    session = await served.live.create_session()
    served.session_id = session["id"]
    served.events = EventCollector()
    await served.events.start(served.live.client, f"/event?sessionID={served.session_id}")


async def one_turn(served: Served, kind: str, session_turns: int) -> tuple[float, float]:
    """(seconds to the response, seconds to the first delta: NaN for tool turns)."""
    if served.turns % session_turns == 0:
        await new_session(served)
    served.turns += 1
    live, events = served.live, served.events
    assert events is not None
    if kind == "tool":
        live.fake.enqueue(call("read", {"filePath": "notes.txt"}), reply(PLAIN_TEXT))
    else:
        live.fake.enqueue(reply(PLAIN_TEXT))
    seen = len(events.frames)
    loop = asyncio.get_running_loop()
    started = loop.time()
    if kind == "async":  # answered once queued: the turn ends with its `session.idle`
        body = {"parts": [{"type": "text", "text": "hi"}]}
        (await live.client.post(f"/session/{served.session_id}/prompt_async", json=body)).raise_for_status()
        idle = await events.wait_for(lambda f: f.type == "session.idle", start=seen)
        frame = await events.wait_for(lambda f: f.type == "message.part.delta", start=seen)
        return idle.received_at - started, frame.received_at - started
    response = await live.prompt(served.session_id, "read the notes" if kind == "tool" else "hi")
    total = loop.time() - started
    response.raise_for_status()
    if kind == "tool":
        return total, float("nan")
    frame = await events.wait_for(lambda f: f.type == "message.part.delta", start=seen)
    return total, frame.received_at - started


async def block(served: Served, turns: int, kind: str, session_turns: int) -> dict[str, float]:
    """`turns` turns on one server: the median of each figure over them (CPU: per turn)."""
    await settle_pid(served.pid)
    cpu_before, main_before = cpu_seconds(served.pid)
    timings = [await one_turn(served, kind, session_turns) for _ in range(turns)]
    cpu_after, main_after = cpu_seconds(served.pid)
    figures = {
        "turn_ms": statistics.median(t[0] for t in timings) * 1000,
        "first_delta_ms": statistics.median(t[1] for t in timings) * 1000,
        "turn_best_ms": min(t[0] for t in timings) * 1000,
        "first_delta_best_ms": min(t[1] for t in timings) * 1000,
        "cpu_ms": (cpu_after - cpu_before) * 1000 / turns,
        "main_cpu_ms": (main_after - main_before) * 1000 / turns,
    }
    for name, samples in served.samples.items():
        if name in ("cpu_ms", "main_cpu_ms"):
            samples.append(figures[name])
        else:
            samples.extend(t[0 if name == "turn_ms" else 1] * 1000 for t in timings)
    return figures


async def settle_pid(pid: int) -> None:
    import psutil  # bench/turns.py's settle takes a psutil process

    await settle(psutil.Process(pid), timeout=5.0)


def quartiles(values: list[float]) -> dict[str, float] | None:
    finite = sorted(value for value in values if value == value)
    if not finite:
        return None
    count = len(finite)
    return {
        "median": round(statistics.median(finite), 3),
        "q1": round(finite[count // 4], 3),
        "q3": round(finite[(3 * count) // 4], 3),
    }


async def compare(args: argparse.Namespace) -> dict[str, Any]:
    sides = (Side("A", ServerTree.parse(args.a)), Side("B", ServerTree.parse(args.b)))
    for side in sides:
        print(f"{side.name}: {side.tree.describe()}", file=sys.stderr)
    differences: dict[str, list[float]] = {name: [] for name in FIGURES + BEST}
    with tempfile.TemporaryDirectory() as tmp_a, tempfile.TemporaryDirectory() as tmp_b:
        async with FakeOpenAI() as fake, contextlib.AsyncExitStack() as stack:
            served: list[Served] = []
            for side, tmp in zip(sides, (tmp_a, tmp_b), strict=True):
                url = await stack.enter_async_context(database(args.db))
                served.append(await stack.enter_async_context(serve(side, Path(tmp), fake, url)))
            for one in served:  # warm-up: first requests import and prepare what later ones reuse
                for _ in range(args.block):
                    await one_turn(one, args.kind, args.session_turns)
            started = time.perf_counter()
            for number in range(args.rounds):
                order = served if number % 2 == 0 else served[::-1]
                medians = {
                    one.side.name: await block(one, args.block, args.kind, args.session_turns)
                    for one in order
                }
                for name in FIGURES + BEST:
                    differences[name].append(medians["B"][name] - medians["A"][name])
            elapsed = time.perf_counter() - started
            for one in served:
                if one.events is not None:
                    await one.events.stop()
    result: dict[str, Any] = {
        "a": args.a,
        "b": args.b,
        "kind": args.kind,
        "database": "postgresql" if args.db else "sqlite",
        "rounds": args.rounds,
        "block": args.block,
        "seconds": round(elapsed, 1),
    }
    for one in served:
        result[one.side.name] = {name: quartiles(samples) for name, samples in one.samples.items()}
    result["b_minus_a"] = {name: quartiles(values) for name, values in differences.items()}
    return result


def table(result: dict[str, Any]) -> str:
    def cell(found: dict[str, float] | None) -> str:
        return "-" if found is None else f"{found['median']:.2f} ({found['q1']:.2f} to {found['q3']:.2f})"

    lines = ["| figure | A | B | B - A per round |", "|---|---|---|---|"]
    for name in FIGURES + BEST:
        cells = [cell(result[column].get(name)) for column in ("A", "B", "b_minus_a")]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("a", help="source tree of A ('-': this checkout), then ,NAME=VALUE settings")
    parser.add_argument("b", help="source tree of B, as A")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--block", type=int, default=5, help="turns per server per round")
    parser.add_argument("--kind", choices=("plain", "tool", "async"), default="plain")
    parser.add_argument("--session-turns", type=int, default=40, help="turns before a new session")
    parser.add_argument("--db", default=None, help="a Postgres URL (default: SQLite in a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    result = asyncio.run(compare(args))
    encoded = orjson.dumps(result, option=orjson.OPT_INDENT_2)
    if args.json is not None:
        args.json.write_bytes(encoded)
    print(encoded.decode())
    print(table(result), file=sys.stderr)


if __name__ == "__main__":
    main()
