"""Load and soak benchmark: many concurrent streaming sessions against one served process.

    python bench/load.py [--sessions 200] [--duration 60] [--out docs/bench]

`agentforge serve` runs as a child process (so its RSS is its own) against the wire-level fake
OpenAI provider. Each of `--sessions` sessions keeps its own SSE stream (`/event?sessionID=`) open
and runs turns back to back for `--duration` seconds; each reply streams 20 chunks. Measured:
- turns and errors (a non-200 answer, a transport failure, or a turn whose deltas never arrived);
- turn latency (POST -> answer) and time to first delta (POST -> first `message.part.delta` over
  SSE): p50 / p99 over the run and per 5 s window;
- the server's RSS, sampled every second (a soak shows whether it keeps growing).
Writes `load.json` and `load.png` (matplotlib) into `--out`, and prints the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.process import ServerFiles, ServerProcess, served
from tests.fakes.openai_server import FakeOpenAI, Script

from agentforge.client.sse import aiter_events

WINDOW = 5.0  # seconds per point of the latency-over-time chart
CHUNKS = 20


@dataclass
class Sample:
    at: float  # seconds since the run started, when the turn ended
    latency: float
    first_delta: float | None


@dataclass
class Results:
    started: float = field(default_factory=time.perf_counter)
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)  # (seconds, bytes)
    server_cpu_s: float = 0.0  # CPU seconds the server used during the run
    bench_cpu_s: float = 0.0  # and this process (clients and fake provider): who was the bottleneck
    deadline: float = 0.0  # set once every session is set up
    go: asyncio.Event = field(default_factory=asyncio.Event)

    def now(self) -> float:
        return time.perf_counter() - self.started

    def start(self, duration: float) -> None:
        self.started = time.perf_counter()
        self.deadline = self.started + duration
        self.go.set()


def _reply() -> Script:
    return Script().text("word " * CHUNKS, chunk_size=5).usage(20, CHUNKS)


async def _stream_deltas(client: httpx2.AsyncClient, session: str, deltas: asyncio.Queue[float]) -> None:
    """Read the session's stream; put the arrival time of each turn's first delta."""
    first_of_turn = True
    async with client.stream("GET", f"/event?sessionID={session}", timeout=None) as response:
        async for event in aiter_events(response.aiter_bytes()):
            if event.type == "message.part.delta" and first_of_turn:
                deltas.put_nowait(time.perf_counter())
                first_of_turn = False
            elif event.type == "session.idle":
                first_of_turn = True


async def _session(server: ServerProcess, fake: FakeOpenAI, results: Results, ready: asyncio.Barrier) -> None:
    client = server.client
    session = (await client.post("/session")).json()["id"]
    deltas: asyncio.Queue[float] = asyncio.Queue()
    reader = asyncio.create_task(_stream_deltas(client, session, deltas))
    await ready.wait()
    await results.go.wait()
    try:
        while time.perf_counter() < results.deadline:
            fake.enqueue(_reply())
            sent = time.perf_counter()
            try:
                body = {"parts": [{"type": "text", "text": "go"}]}
                response = await client.post(f"/session/{session}/message", json=body, timeout=120)
            except httpx2.HTTPError as exc:
                results.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            ended = time.perf_counter()
            if response.status_code != 200:
                results.errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
                continue
            first = await _first_delta(deltas, sent)
            if first is None:
                results.errors.append("no delta arrived over SSE")
            results.samples.append(Sample(results.now(), ended - sent, first))
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def _first_delta(deltas: asyncio.Queue[float], sent: float) -> float | None:
    try:
        arrived = await asyncio.wait_for(deltas.get(), 10)
    except TimeoutError:
        return None
    return arrived - sent


async def _sample_rss(pid: int, results: Results) -> None:
    process = psutil.Process(pid)
    while True:
        results.rss.append((results.now(), process.memory_info().rss))
        await asyncio.sleep(1.0)


def _cpu_seconds(pid: int) -> tuple[float, float]:
    server = psutil.Process(pid).cpu_times()
    bench = psutil.Process().cpu_times()
    return server.user + server.system, bench.user + bench.system


def _percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _windows(samples: list[Sample], duration: float) -> list[dict[str, float]]:
    points = []
    start = 0.0
    while start < duration + WINDOW:
        inside = [s.latency for s in samples if start <= s.at < start + WINDOW]
        if inside:
            points.append(
                {
                    "t": start + WINDOW / 2,
                    "p50_ms": _ms(_percentile(inside, 50)),
                    "p99_ms": _ms(_percentile(inside, 99)),
                    "turns_per_s": round(len(inside) / WINDOW, 1),
                }
            )
        start += WINDOW
    return points


def summarise(results: Results, args: argparse.Namespace) -> dict[str, Any]:
    latencies = [s.latency for s in results.samples]
    firsts = [s.first_delta for s in results.samples if s.first_delta is not None]
    rss = [value for _, value in results.rss]
    return {
        "sessions": args.sessions,
        "duration_s": args.duration,
        "turns": len(results.samples),
        "errors": len(results.errors),
        "error_examples": sorted(set(results.errors))[:5],
        "turns_per_s": round(len(latencies) / max(args.duration, 1e-9), 1),
        "turn_p50_ms": _ms(_percentile(latencies, 50)),
        "turn_p99_ms": _ms(_percentile(latencies, 99)),
        "first_delta_p50_ms": _ms(_percentile(firsts, 50)),
        "first_delta_p99_ms": _ms(_percentile(firsts, 99)),
        "server_cpu_s": round(results.server_cpu_s, 1),
        "bench_cpu_s": round(results.bench_cpu_s, 1),
        "rss_start_mb": round(rss[0] / 2**20, 1) if rss else None,
        "rss_peak_mb": round(max(rss) / 2**20, 1) if rss else None,
        "rss_end_mb": round(rss[-1] / 2**20, 1) if rss else None,
        "windows": _windows(results.samples, args.duration),
        "rss_mb": [[round(t, 1), round(v / 2**20, 1)] for t, v in results.rss],
    }


def draw(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (latency, memory) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    windows = summary["windows"]
    t = [w["t"] for w in windows]
    latency.plot(t, [w["p50_ms"] for w in windows], marker="o", label="turn p50")
    latency.plot(t, [w["p99_ms"] for w in windows], marker="o", label="turn p99")
    latency.set_ylabel("ms")
    latency.set_title(
        f"{summary['sessions']} concurrent streaming sessions: {summary['turns']} turns, "
        f"{summary['errors']} errors, first delta p50 {summary['first_delta_p50_ms']} ms"
    )
    latency.legend()
    latency.grid(alpha=0.3)
    memory.plot([p[0] for p in summary["rss_mb"]], [p[1] for p in summary["rss_mb"]], color="tab:green")
    memory.set_ylabel("server RSS (MB)")
    memory.set_xlabel("seconds")
    memory.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeOpenAI() as fake:
            files = ServerFiles(Path(tmp))
            files.write_config(fake, retry={"max_attempts": 1})
            async with served(files) as server:
                limits = httpx2.Limits(max_connections=args.sessions * 2 + 10)
                server.client = httpx2.AsyncClient(base_url=server.url, timeout=60, limits=limits)
                results = Results()
                sampler = asyncio.create_task(_sample_rss(server.process.pid, results))
                ready = asyncio.Barrier(args.sessions + 1)
                runs = [
                    asyncio.create_task(_session(server, fake, results, ready)) for _ in range(args.sessions)
                ]
                await ready.wait()  # every session created, its stream open
                results.start(args.duration)
                server_cpu, bench_cpu = _cpu_seconds(server.process.pid)
                await asyncio.gather(*runs)
                sampler.cancel()
                server_end, bench_end = _cpu_seconds(server.process.pid)
                results.server_cpu_s = server_end - server_cpu
                results.bench_cpu_s = bench_end - bench_cpu
                await server.client.aclose()
    summary = summarise(results, args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    draw(summary, args.out / "load.png")
    return summary


if __name__ == "__main__":
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of turns after set-up")
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    print(orjson.dumps(asyncio.run(main(parser.parse_args())), option=orjson.OPT_INDENT_2).decode())
