"""Turn benchmark: the server against a raw run of the same fake provider. Prints JSON.

    python bench/turns.py [--turns 40] [--deltas 20000] [--concurrent 50] [--sessions 200]
                          [--db postgresql://user@host/db]   (default: SQLite in a temp dir)

Measured (medians in ms unless named otherwise):
- raw_turn / server_turn: one plain text turn read straight from the fake provider vs. the same
  script through POST /session/{id}/message; `turn_overhead` is the difference.
- raw_first_delta / server_first_delta: request sent -> first content chunk (raw) or first
  `message.part.delta` over SSE (server); `first_delta_overhead` is the difference.
- server_async_first_delta / async_first_delta_overhead: the same through
  POST /session/{id}/prompt_async (answered 204 once the prompt is queued durably), then the turn's
  end awaited before the next.
- raw_same_body_turn_ms / raw_same_body_first_delta_ms / raw_same_body_tool_turn_ms: the raw
  figures again, posting the very requests the server posted in the measured turns (its history,
  tools and system prompt: ~20 KB against the one-line prompt's ~100 bytes), replayed after them.
  What the fake spends on reading a larger request is the provider's time, so
  turn_overhead_same_body_ms, first_delta_overhead_same_body_ms and tool_turn_overhead_same_body_ms
  (server_turn, server_first_delta and server_tool_turn minus the matching raw_same_body figure)
  are the server's own share.
- server_cpu_per_turn_ms / server_main_cpu_per_turn_ms: the server process's CPU time (all
  threads / the event loop's thread) over the measured plain turns, per turn.
- raw_tool_turn / server_tool_turn: a turn whose model calls `read` once and then answers (two model
  rounds); `tool_turn_overhead` is the difference (and the `_same_body` figures above).
- deltas_per_second: one turn streaming `--deltas` one-character chunks, received over SSE.
- concurrent: `--concurrent` sessions each running one turn at once, wall time and the server's CPU
  time over it.
- rss_start_mb / rss_after_sessions_mb: the server's resident memory before the first turn and after
  `--sessions` more sessions of one turn each.
Goals (not asserted; bench/README.md): first delta overhead <= 5 ms, plain turn <= 8 ms, tool turn
<= 15 ms, <= 10 ms of server CPU per plain turn, >= 45,000 deltas/s, 50 one-turn sessions <= 0.5 s,
<= 150 MB RSS after 200 sessions.
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
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import orjson
import psutil

sys.path.insert(0, os.environ.get("BENCH_REPO", str(Path(__file__).resolve().parents[1])))

from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

PLAIN_TEXT = "Hello! This is a short plain answer from the model."


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


TINY_BODY: dict[str, Any] = {
    "model": "test-model",
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


async def raw_turn(
    fake: FakeOpenAI, client: httpx2.AsyncClient, body: dict[str, Any] = TINY_BODY
) -> tuple[float, float]:
    """Read one streamed reply straight from the fake: (total seconds, seconds to first content).
    `body`: the request posted (a one-line prompt, or one the server posted, replayed)."""
    fake.enqueue(reply(PLAIN_TEXT))
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


async def server_async_turn(live: LiveServer, session_id: str, events: EventCollector) -> float:
    """`prompt_async` -> the first delta over SSE; then waits for the turn's end (`session.idle`)."""
    live.fake.enqueue(reply(PLAIN_TEXT))
    seen = len(events.frames)
    loop = asyncio.get_running_loop()
    started = loop.time()
    body = {"parts": [{"type": "text", "text": "hi"}]}
    response = await live.client.post(f"/session/{session_id}/prompt_async", json=body)
    response.raise_for_status()
    frame = await events.wait_for(lambda f: f.type == "message.part.delta", start=seen)
    await events.wait_for(lambda f: f.type == "session.idle", start=seen)
    return frame.received_at - started


def _cpu(process: psutil.Process) -> tuple[float, float]:
    """CPU seconds of the whole process and of its main thread (the event loop's)."""
    times = process.cpu_times()
    main = next((t for t in process.threads() if t.id == process.pid), None)
    return times.user + times.system, 0.0 if main is None else main.user_time + main.system_time


async def settle(server: psutil.Process, timeout: float = 10.0) -> None:
    """Wait until the server is idle (under 10% of a core over 0.2 s): what a section leaves running
    after its responses (a long turn's follow-up work) must not be counted in the next one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before, _ = _cpu(server)
        await asyncio.sleep(0.2)
        after, _ = _cpu(server)
        if after - before < 0.02:
            return


async def measure_turns(live: LiveServer, turns: int, server: psutil.Process) -> dict[str, float]:
    async with httpx2.AsyncClient(timeout=30) as client:
        for _ in range(3):
            await raw_turn(live.fake, client)
        raw = [await raw_turn(live.fake, client) for _ in range(turns)]
    session = await live.create_session()
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session['id']}")
    for _ in range(3):
        await server_turn(live, session["id"], events)
    cpu_before, main_before = _cpu(server)
    posted = len(live.fake.requests)
    served = [await server_turn(live, session["id"], events) for _ in range(turns)]
    cpu_after, main_after = _cpu(server)
    queued = [await server_async_turn(live, session["id"], events) for _ in range(turns)]
    await events.stop()
    # The same requests the server posted (history, tools, system prompt), read raw: what the fake
    # itself spends on the larger body is the provider's time, not the server's.
    async with httpx2.AsyncClient(timeout=30) as client:
        replayed = [await raw_turn(live.fake, client, body) for body in live.fake.requests[posted:]]
    raw_total = statistics.median(r[0] for r in raw)
    raw_first = statistics.median(r[1] for r in raw)
    server_total = statistics.median(s[0] for s in served)
    server_first = statistics.median(s[1] for s in served)
    same_total = statistics.median(r[0] for r in replayed)
    same_first = statistics.median(r[1] for r in replayed)
    return {
        "raw_turn_ms": _ms(raw_total),
        "server_turn_ms": _ms(server_total),
        "turn_overhead_ms": _ms(server_total - raw_total),
        "raw_first_delta_ms": _ms(raw_first),
        "server_first_delta_ms": _ms(server_first),
        "first_delta_overhead_ms": _ms(server_first - raw_first),
        "server_async_first_delta_ms": _ms(statistics.median(queued)),
        "async_first_delta_overhead_ms": _ms(statistics.median(queued) - raw_first),
        "raw_same_body_turn_ms": _ms(same_total),
        "turn_overhead_same_body_ms": _ms(server_total - same_total),
        "raw_same_body_first_delta_ms": _ms(same_first),
        "first_delta_overhead_same_body_ms": _ms(server_first - same_first),
        "server_cpu_per_turn_ms": _ms((cpu_after - cpu_before) / turns),
        "server_main_cpu_per_turn_ms": _ms((main_after - main_before) / turns),
    }


LAGGED_ATTEMPTS = 3


def _tool_scripts() -> list[Script]:
    return [call("read", {"filePath": "notes.txt"}), reply(PLAIN_TEXT)]


async def raw_tool_turn(
    fake: FakeOpenAI, client: httpx2.AsyncClient, bodies: Sequence[dict[str, Any]] = (TINY_BODY, TINY_BODY)
) -> float:
    """The two model rounds of a tool turn read straight from the fake, back to back, posting
    `bodies` (one-line prompts, or the two requests of a served tool turn, replayed)."""
    started = time.perf_counter()
    for script, body in zip(_tool_scripts(), bodies, strict=True):
        fake.enqueue(script)
        async with client.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response:
            async for _line in response.aiter_lines():
                pass
    return time.perf_counter() - started


async def measure_tool_turns(live: LiveServer, turns: int) -> dict[str, float]:
    (live.workspace / "notes.txt").write_text("a short file the model reads\n")
    async with httpx2.AsyncClient(timeout=30) as client:
        raw = [await raw_tool_turn(live.fake, client) for _ in range(turns + 3)][3:]
    session = await live.create_session()
    served: list[float] = []
    posted: list[Sequence[dict[str, Any]]] = []
    for _ in range(turns + 3):
        live.fake.enqueue(*_tool_scripts())
        first = len(live.fake.requests)
        started = time.perf_counter()
        response = await live.prompt(session["id"], "read the notes")
        served.append(time.perf_counter() - started)
        response.raise_for_status()
        posted.append(live.fake.requests[first:])
    async with httpx2.AsyncClient(timeout=30) as client:
        replayed = [await raw_tool_turn(live.fake, client, bodies) for bodies in posted[3:]]
    raw_total, server_total = statistics.median(raw), statistics.median(served[3:])
    same_total = statistics.median(replayed)
    return {
        "raw_tool_turn_ms": _ms(raw_total),
        "server_tool_turn_ms": _ms(server_total),
        "tool_turn_overhead_ms": _ms(server_total - raw_total),
        "raw_same_body_tool_turn_ms": _ms(same_total),
        "tool_turn_overhead_same_body_ms": _ms(server_total - same_total),
    }


async def measure_delta_rate(live: LiveServer, deltas: int, server: psutil.Process) -> dict[str, float]:
    text = "x" * deltas
    async with httpx2.AsyncClient(timeout=60) as client:
        live.fake.enqueue(Script().text(text, chunk_size=1).finish("stop"))
        body = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
        started = time.perf_counter()
        async with client.stream("POST", f"{live.fake.base_url}/chat/completions", json=body) as response:
            async for _line in response.aiter_lines():
                pass
        raw_seconds = time.perf_counter() - started
    # This client shares the machine's cores with the server: when it falls too far behind, the
    # server cuts its stream off (`stream.lagged`, as for any slow subscriber) and the run is redone.
    for attempt in range(1, LAGGED_ATTEMPTS + 1):
        session = await live.create_session()
        events = EventCollector()
        await events.start(live.client, f"/event?sessionID={session['id']}")
        live.fake.enqueue(Script().text(text, chunk_size=1).finish("stop"))
        cpu_before, _ = _cpu(server)
        await live.prompt(session["id"], "go")
        ended = await events.wait_for(lambda f: f.type in ("session.idle", "stream.lagged"), timeout=120)
        cpu_after, _ = _cpu(server)
        await events.stop()
        if ended.type == "session.idle":
            break
        if attempt == LAGGED_ATTEMPTS:
            raise SystemExit(f"the delta stream lagged {attempt} times: no figure")
        await settle(server)
    received = events.of_type("message.part.delta")
    span = received[-1].received_at - received[0].received_at if len(received) > 1 else float("nan")
    return {
        "deltas": len(received),
        "delta_attempts": attempt,
        "raw_chunks_per_second": round(deltas / raw_seconds),
        "server_deltas_per_second": round(len(received) / span) if span else 0,
        "server_cpu_per_delta_us": round((cpu_after - cpu_before) * 1e6 / deltas, 2),
    }


async def measure_concurrent(live: LiveServer, sessions: int, server: psutil.Process) -> dict[str, float]:
    created = [await live.create_session() for _ in range(sessions)]
    live.fake.enqueue(*[reply(PLAIN_TEXT) for _ in range(sessions)])
    cpu_before, _ = _cpu(server)
    started = time.perf_counter()
    responses = await asyncio.gather(*(live.prompt(s["id"], "hi") for s in created))
    elapsed = time.perf_counter() - started
    cpu_after, _ = _cpu(server)
    return {
        "concurrent_sessions": sessions,
        "concurrent_wall_ms": _ms(elapsed),
        "concurrent_server_cpu_ms": _ms(cpu_after - cpu_before),
        "concurrent_ok": sum(r.status_code == 200 for r in responses),
    }


async def measure_sessions(live: LiveServer, sessions: int, server: psutil.Process) -> dict[str, float]:
    """RSS after `sessions` more sessions of one plain turn each."""
    for _ in range(sessions):
        created = await live.create_session()
        live.fake.enqueue(reply(PLAIN_TEXT))
        (await live.prompt(created["id"], "hi")).raise_for_status()
    return {"sessions": sessions, "rss_after_sessions_mb": round(server.memory_info().rss / 2**20, 1)}


@dataclass(frozen=True, slots=True)
class ServerTree:
    """Which server to run: a source tree's `src` (None: this checkout's), served by another
    virtualenv's interpreter (None: this one; for trees that differ in their dependencies), with
    extra environment."""

    src: str | None = None
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str) -> ServerTree:
        """`SRC[,python=PATH][,NAME=VALUE ...]`; SRC `-` (or empty): this checkout's. A SRC that
        holds no `agentforge` package is refused: the installed one would be served instead."""
        src, *settings = spec.split(",")
        env = dict(setting.split("=", 1) for setting in settings)
        python = env.pop("python", None)
        if src in ("", "-"):
            return cls(None, python, env)
        tree = Path(src).resolve()
        if not (tree / "agentforge").is_dir():
            raise SystemExit(f"{src}: no agentforge package there (give a tree's src directory)")
        return cls(str(tree), python, env)

    def describe(self) -> str:
        return f"{self.src or 'this checkout'} ({self.python or sys.executable})"


async def start_server(
    tree: ServerTree,
    tmp: Path,
    fake: FakeOpenAI,
    database_url: str | None = None,
    *,
    wrapper: Sequence[str] = (),
    start_timeout: float = 30.0,
) -> tuple[asyncio.subprocess.Process, LiveServer, httpx2.AsyncClient]:
    """`agentforge serve` of `tree` in its own process (under `wrapper`, e.g. valgrind) against
    `fake`, in `tmp`: its process, a LiveServer for it and the client the LiveServer uses (the
    caller closes it, then terminates the process). Its own logs go nowhere."""
    config_path = tmp / "agentforge.json"
    config_path.write_bytes(orjson.dumps(fake_provider_config(fake)))
    workspace = tmp / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("a short file the model reads\n")
    env = {**os.environ, **tree.env}
    if tree.src is not None:
        env["PYTHONPATH"] = tree.src
    process = await asyncio.create_subprocess_exec(
        *wrapper, tree.python or sys.executable, "-m", "agentforge.cli", "serve", "--port", "0",
        "--config", str(config_path), "--data-dir", str(tmp / "data"),
        "--db", database_url or f"sqlite:///{tmp / 'forge.db'}",
        cwd=workspace, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), start_timeout)).decode()
    except BaseException:
        process.terminate()
        await process.wait()
        raise
    if not line:
        await process.wait()
        raise SystemExit(f"the server of {tree.describe()} exited ({process.returncode}) before it listened")
    url = line.rsplit(" ", 1)[-1].strip()
    client = httpx2.AsyncClient(base_url=url, timeout=max(120.0, start_timeout))
    live = LiveServer(
        url=url,
        settings=None,  # type: ignore[arg-type]  # served in its own process: nothing to hand over
        fake=fake,
        client=client,
        workspace=workspace,
        app=None,  # type: ignore[arg-type]
    )
    return process, live, client


@contextlib.asynccontextmanager
async def server_process(
    tmp: Path, fake: FakeOpenAI, database_url: str | None = None, tree: ServerTree | None = None
) -> AsyncIterator[tuple[LiveServer, psutil.Process]]:
    """`agentforge serve` in its own process, so the fake provider and this client do not share its CPU."""
    process, live, client = await start_server(tree or ServerTree(), tmp, fake, database_url)
    try:
        async with client:
            yield live, psutil.Process(process.pid)
    finally:
        process.terminate()
        await process.wait()


@contextlib.asynccontextmanager
async def database(url: str | None) -> AsyncIterator[str | None]:
    """SQLite (None) as is; for Postgres a fresh schema, dropped afterwards."""
    if url is None:
        yield None
        return
    import asyncpg  # only for Postgres runs

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    plain = url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(plain)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        yield f"{url}{'&' if '?' in url else '?'}schema={schema}"
    finally:
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await conn.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            FakeOpenAI() as fake,
            database(args.db) as url,
            server_process(Path(tmp), fake, url, _tree(args)) as (live, server),
        ):
            result: dict[str, Any] = {
                "python": sys.version.split()[0],
                "server": "separate process",
                "database": "postgresql" if args.db else "sqlite",
                "rss_start_mb": round(server.memory_info().rss / 2**20, 1),
            }
            skip = set(args.skip.split(","))
            if "turns" not in skip:
                await settle(server)
                result.update(await measure_turns(live, args.turns, server))
            if "tools" not in skip:
                await settle(server)
                result.update(await measure_tool_turns(live, max(args.turns // 2, 5)))
            if "deltas" not in skip:
                await settle(server)
                result.update(await measure_delta_rate(live, args.deltas, server))
            if "concurrent" not in skip:
                await settle(server)
                result.update(await measure_concurrent(live, args.concurrent, server))
            if "sessions" not in skip:
                result.update(await measure_sessions(live, args.sessions, server))
            return result


def _tree(args: argparse.Namespace) -> ServerTree:
    spec = args.server_src or "-"
    return ServerTree.parse(spec if args.server_python is None else f"{spec},python={args.server_python}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--db", default=None, help="a Postgres URL (default: SQLite in a temp dir)")
    parser.add_argument(
        "--server-src", default=None, help="run the server from this source tree (compare commits)"
    )
    parser.add_argument(
        "--server-python",
        default=None,
        help="run the server with this interpreter (another virtualenv: compare dependency changes)",
    )
    parser.add_argument("--skip", default="", help="comma-separated: turns,tools,deltas,concurrent,sessions")
    print(orjson.dumps(asyncio.run(main(parser.parse_args())), option=orjson.OPT_INDENT_2).decode())
