"""Replica benchmark: what reading a turn from another replica costs. Writes JSON and a PNG chart.

    AGENTFORGE_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \\
        python bench/replicas.py [--turns 20] [--deltas 5000] [--out docs/bench]

Two `agentforge serve` processes on one fresh Postgres schema and the fake provider; every turn is
prompted through replica A while SSE streams of the session are open on A and on B:
- first_delta_ms: prompt sent -> first `message.part.delta` on A's stream (same process) and on B's
  (crossed the cluster channel); medians over `--turns` turns.
- characters_per_second: one turn streaming `--deltas` one-character chunks, the characters that
  arrived after the first delta over the time from the first delta to the last, on each stream
  (another replica hears consecutive deltas announced as one: `delta_events` counts the deltas
  each stream received).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.databases import _postgres_schema
from tests.fakes.openai_server import FakeOpenAI, Script, reply
from tests.runtime.replicas import Replica, Stream, replicas

DELTA = "message.part.delta"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _deltas(stream: Stream, since: int) -> list[tuple[float, int]]:
    """The deltas since event `since`: when each arrived, and how many characters it carried."""
    events = stream.events[since:]
    return [(at, len(event.properties["delta"])) for at, event in events if event.type == DELTA]


async def _settled(stream: Stream, chars: int, since: int, timeout: float = 60.0) -> list[tuple[float, int]]:
    """The deltas since event `since` once they carried `chars` characters. Another replica hears
    consecutive deltas of a part announced as one (up to 2,048 characters: runtime/cluster.py),
    so its stream counts fewer events for the same text."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        seen = _deltas(stream, since)
        carried = sum(size for _, size in seen)
        if carried >= chars:
            return seen
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{carried} of {chars} characters arrived ({len(seen)} deltas)")
        await asyncio.sleep(0.01)


Pair = tuple[Stream, Stream]


async def first_deltas(a: Replica, streams: Pair, session_id: str, fake: FakeOpenAI) -> tuple[float, float]:
    on_a, on_b = streams
    marks = (len(on_a.events), len(on_b.events))
    fake.enqueue(reply("Hello from replica A, read on replica B."))
    started = asyncio.get_running_loop().time()
    (await a.prompt(session_id, "hi")).raise_for_status()
    first_a = (await _settled(on_a, 1, marks[0]))[0][0]
    first_b = (await _settled(on_b, 1, marks[1]))[0][0]
    return first_a - started, first_b - started


async def delta_rates(
    a: Replica, streams: Pair, session_id: str, fake: FakeOpenAI, deltas: int
) -> tuple[tuple[float, float], tuple[int, int]]:
    """Characters per second from the first delta to the last, on each stream (the model sends one
    a chunk), and how many delta events each stream received."""
    on_a, on_b = streams
    marks = (len(on_a.events), len(on_b.events))
    fake.enqueue(Script().text("x" * deltas, chunk_size=1).finish("stop"))
    (await a.prompt(session_id, "go")).raise_for_status()
    rates, events = [], []
    for stream, mark in zip(streams, marks, strict=True):
        seen = await _settled(stream, deltas, mark)
        span = seen[-1][0] - seen[0][0]
        if span <= 0:
            raise ValueError(f"{deltas} characters arrived in one delta: give --deltas above 2,048")
        rates.append((deltas - seen[0][1]) / span)  # the first delta's characters came at its start
        events.append(len(seen))
    return (rates[0], rates[1]), (events[0], events[1])


async def main(args: argparse.Namespace) -> dict[str, Any]:
    async with FakeOpenAI() as fake, _postgres_schema(migrated=True) as url:
        with tempfile.TemporaryDirectory() as tmp:
            async with replicas(Path(tmp), url, fake, "a", "b") as (a, b):
                session = (await a.client.post("/session", json={})).json()["id"]
                streams = (await Stream.open(a.client, session), await Stream.open(b.client, session))
                try:
                    for _ in range(3):  # warm-up
                        await first_deltas(a, streams, session, fake)
                    firsts = [await first_deltas(a, streams, session, fake) for _ in range(args.turns)]
                    (rate_a, rate_b), (events_a, events_b) = await delta_rates(
                        a, streams, session, fake, args.deltas
                    )
                finally:
                    for stream in streams:
                        await stream.close()
    return {
        "turns": args.turns,
        "deltas": args.deltas,
        "first_delta_ms": {
            "same_replica": _ms(statistics.median(f[0] for f in firsts)),
            "other_replica": _ms(statistics.median(f[1] for f in firsts)),
        },
        "characters_per_second": {"same_replica": round(rate_a), "other_replica": round(rate_b)},
        "delta_events": {"same_replica": events_a, "other_replica": events_b},
    }


def chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (left, right) = pyplot.subplots(1, 2, figsize=(9, 3.5))
    labels = ["same replica", "other replica"]
    left.bar(labels, list(result["first_delta_ms"].values()), color=["#4c72b0", "#dd8452"])
    left.set_title("time to first delta (ms, median)")
    right.bar(labels, list(result["characters_per_second"].values()), color=["#4c72b0", "#dd8452"])
    right.set_title(f"characters/s ({result['deltas']} one-char chunks)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "docs" / "bench")
    parsed = parser.parse_args()
    outcome = asyncio.run(main(parsed))
    parsed.out.mkdir(parents=True, exist_ok=True)
    (parsed.out / "replicas.json").write_bytes(orjson.dumps(outcome, option=orjson.OPT_INDENT_2))
    chart(outcome, parsed.out / "replicas.png")
    print(orjson.dumps(outcome, option=orjson.OPT_INDENT_2).decode())
