"""Turn benchmark: the server against a raw run of the same fake provider. Prints JSON.

    python bench/turns.py [--turns 40] [--deltas 20000] [--concurrent 50]

Measured (medians in ms unless named otherwise):
- raw_turn / server_turn: one plain text turn read straight from the fake provider vs. the same
  script through POST /session/{id}/message; `turn_overhead` is the difference.
- raw_first_delta / server_first_delta: request sent -> first content chunk (raw) or first
  `message.part.delta` over SSE (server); `first_delta_overhead` is the difference.
- deltas_per_second: one turn streaming `--deltas` one-character chunks, received over SSE.
- concurrent: `--concurrent` sessions each running one turn at once, wall time.
Targets to design for (not asserted): <20 ms turn overhead, <10 ms to first delta,
>=20,000 deltas/s on one session, 50 one-turn sessions in under a second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config
from tests.fakes.openai_server import FakeOpenAI, Script, reply

PLAIN_TEXT = "Hello! This is a short plain answer from the model."


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def raw_turn(fake: FakeOpenAI, client: httpx2.AsyncClient) -> tuple[float, float]:
    """Read one streamed reply straight from the fake: (total seconds, seconds to first content)."""
    fake.enqueue(reply(PLAIN_TEXT))
    body = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    started = time.perf_counter()
    first = 0.0
    async with client.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if not first and line.startswith("data: {") and '"content"' in line:
                first = time.perf_counter() - started
    return time.perf_counter() - started, first


async def server_turn(live: LiveServer, session_id: str, events: EventCollector) -> tuple[float, float]:
    live.fake.enqueue(reply(PLAIN_TEXT))
    seen = len(events.frames)
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await live.prompt(session_id, "hi")
    total = loop.time() - started
    response.raise_for_status()
    frame = await events.wait_for(lambda f: f.type == "message.part.delta", start=seen)
    return total, frame.received_at - started


async def measure_turns(live: LiveServer, turns: int) -> dict[str, float]:
    async with httpx2.AsyncClient(timeout=30) as client:
        for _ in range(3):
            await raw_turn(live.fake, client)
        raw = [await raw_turn(live.fake, client) for _ in range(turns)]
    session = await live.create_session()
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session['id']}")
    for _ in range(3):
        await server_turn(live, session["id"], events)
    served = [await server_turn(live, session["id"], events) for _ in range(turns)]
    await events.stop()
    raw_total = statistics.median(r[0] for r in raw)
    raw_first = statistics.median(r[1] for r in raw)
    server_total = statistics.median(s[0] for s in served)
    server_first = statistics.median(s[1] for s in served)
    return {
        "raw_turn_ms": _ms(raw_total),
        "server_turn_ms": _ms(server_total),
        "turn_overhead_ms": _ms(server_total - raw_total),
        "raw_first_delta_ms": _ms(raw_first),
        "server_first_delta_ms": _ms(server_first),
        "first_delta_overhead_ms": _ms(server_first - raw_first),
    }


async def measure_delta_rate(live: LiveServer, deltas: int) -> dict[str, float]:
    text = "x" * deltas
    async with httpx2.AsyncClient(timeout=60) as client:
        live.fake.enqueue(Script().text(text, chunk_size=1).finish("stop"))
        body = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
        started = time.perf_counter()
        async with client.stream("POST", f"{live.fake.base_url}/chat/completions", json=body) as response:
            async for _line in response.aiter_lines():
                pass
        raw_seconds = time.perf_counter() - started
    session = await live.create_session()
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session['id']}")
    live.fake.enqueue(Script().text(text, chunk_size=1).finish("stop"))
    await live.prompt(session["id"], "go")
    await events.wait_for(lambda f: f.type == "session.idle", timeout=120)
    await events.stop()
    received = events.of_type("message.part.delta")
    span = received[-1].received_at - received[0].received_at if len(received) > 1 else float("nan")
    return {
        "deltas": len(received),
        "raw_chunks_per_second": round(deltas / raw_seconds),
        "server_deltas_per_second": round(len(received) / span) if span else 0,
    }


async def measure_concurrent(live: LiveServer, sessions: int) -> dict[str, float]:
    created = [await live.create_session() for _ in range(sessions)]
    live.fake.enqueue(*[reply(PLAIN_TEXT) for _ in range(sessions)])
    started = time.perf_counter()
    responses = await asyncio.gather(*(live.prompt(s["id"], "hi") for s in created))
    elapsed = time.perf_counter() - started
    return {
        "concurrent_sessions": sessions,
        "concurrent_wall_ms": _ms(elapsed),
        "concurrent_ok": sum(r.status_code == 200 for r in responses),
    }


@contextlib.asynccontextmanager
async def server_process(tmp: Path, fake: FakeOpenAI) -> AsyncIterator[LiveServer]:
    """`agentforge serve` in its own process, so the fake provider and this client do not share its CPU."""
    config_path = tmp / "agentforge.json"
    config_path.write_bytes(orjson.dumps(fake_provider_config(fake)))
    workspace = tmp / "workspace"
    workspace.mkdir()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentforge.cli", "serve", "--port", "0", "--config", str(config_path),
        "--data-dir", str(tmp / "data"), "--db", f"sqlite:///{tmp / 'forge.db'}",
        cwd=workspace, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    url = line.rsplit(" ", 1)[-1].strip()
    try:
        async with httpx2.AsyncClient(base_url=url, timeout=120) as client:
            # The server runs in its own process: no in-process settings or app to hand over.
            yield LiveServer(
                url=url,
                settings=None,  # type: ignore[arg-type]
                fake=fake,
                client=client,
                workspace=workspace,
                app=None,  # type: ignore[arg-type]
            )
    finally:
        process.terminate()
        await process.wait()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeOpenAI() as fake, server_process(Path(tmp), fake) as live:
            result: dict[str, Any] = {"python": sys.version.split()[0], "server": "separate process"}
            result.update(await measure_turns(live, args.turns))
            result.update(await measure_delta_rate(live, args.deltas))
            result.update(await measure_concurrent(live, args.concurrent))
            return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--concurrent", type=int, default=50)
    print(orjson.dumps(asyncio.run(main(parser.parse_args())), option=orjson.OPT_INDENT_2).decode())
