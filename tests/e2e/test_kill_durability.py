"""kill -9 mid-stream: a server subprocess is killed while a text part streams, restarted on the same
data, and what it stored is compared with what an SSE client saw (session/checkpoint.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2

from agentforge.session.checkpoint import CHECKPOINT_CHARS
from tests.databases import owner_url_for
from tests.e2e.harness import EventCollector, fake_provider_config
from tests.fakes.openai_server import FakeOpenAI, Script

CHUNK = 40


@contextlib.asynccontextmanager
async def _served(
    tmp_path: Path, fake: FakeOpenAI, database_url: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    config = tmp_path / "agentforge.json"
    config.write_text(json.dumps(fake_provider_config(fake)))
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "AGENTFORGE_DATABASE_URL": database_url}
    owner = owner_url_for(database_url)
    if owner is not None:
        env["AGENTFORGE_DATABASE_OWNER_URL"] = owner
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentforge.cli",
        "serve",
        "--port",
        "0",
        "--config",
        str(config),
        "--data-dir",
        str(tmp_path / "data"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=workspace,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def _url(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    assert "listening on http://" in line, line
    return line.split()[-1]


def _seen(collector: EventCollector) -> str:
    return "".join(f.properties["delta"] for f in collector.frames if f.type == "message.part.delta")


async def test_kill_9_mid_stream_loses_at_most_one_checkpoint_interval(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    text = "".join(f"{i:06d} " for i in range(3000))  # 21,000 characters, ~4 s of streaming
    script = Script()
    for start in range(0, len(text), CHUNK * 10):
        script.text(text[start : start + CHUNK * 10], chunk_size=CHUNK).sleep(0.01)
    fake_openai.enqueue(script)

    async with _served(tmp_path, fake_openai, database_url) as first:
        url = await _url(first)
        async with httpx2.AsyncClient(base_url=url, timeout=30) as client:
            session = (await client.post("/session")).json()
            watcher = EventCollector()
            await watcher.start(client, f"/event?sessionID={session['id']}")
            response = await client.post(
                f"/session/{session['id']}/prompt_async", json={"parts": [{"type": "text", "text": "go"}]}
            )
            assert response.status_code == 204
            await watcher.wait_for(lambda _: len(_seen(watcher)) >= len(text) // 2, timeout=60)
            first.send_signal(signal.SIGKILL)
            await first.wait()
            await watcher.stop()
    seen = _seen(watcher)
    assert len(seen) < len(text), "the turn finished before the kill: nothing was tested"

    async with _served(tmp_path, fake_openai, database_url) as second:
        url = await _url(second)
        async with httpx2.AsyncClient(base_url=url, timeout=30) as client:
            messages: list[dict[str, Any]] = (await client.get(f"/session/{session['id']}/message")).json()

    (assistant,) = [m for m in messages if m["info"]["role"] == "assistant"]
    (part,) = [p for p in assistant["parts"] if p["type"] == "text"]
    stored = part["text"]
    assert seen.startswith(stored)
    assert 0 < len(seen) - len(stored) <= CHECKPOINT_CHARS or stored == seen
    assert len(stored) > 0
    assert part["time"]["end"] is not None  # start-up recovery closed it, keeping its text
