"""Runtimes share their loop's pooled provider clients: closing one runtime never cuts another's stream,
and the last one to close closes the clients."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from agentforge.llm.pool import pooled_clients
from tests.e2e.harness import EventCollector, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script


async def test_closing_one_runtime_keeps_the_others_stream_and_the_last_closes_the_clients(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with start_live_server(tmp_path / "a", fake_openai, config) as streaming:
        async with contextlib.AsyncExitStack() as other_server:
            other = await other_server.enter_async_context(
                start_live_server(tmp_path / "b", fake_openai, config)
            )
            fake_openai.enqueue(Script().text("hello").usage(10, 5).finish())
            warmup = await other.prompt((await other.create_session())["id"], "hi")
            assert warmup.status_code == 200
            [client] = pooled_clients()  # one endpoint, so both runtimes stream through this client

            gate = asyncio.Event()
            fake_openai.enqueue(
                Script().text("first half").pause(gate).text(", second").usage(10, 5).finish()
            )
            sid = (await streaming.create_session())["id"]
            events = EventCollector()
            await events.start(streaming.client, f"/event?sessionID={sid}")
            prompt = asyncio.create_task(streaming.prompt(sid, "go"))
            await events.wait_for(lambda f: f.type == "message.part.delta")

            await other_server.aclose()  # the other runtime closes mid-stream
            assert not client.is_closed()

        gate.set()
        result = await asyncio.wait_for(prompt, 10)
        await events.stop()
        assert result.status_code == 200
        assert [p["text"] for p in result.json()["parts"] if p["type"] == "text"] == ["first half, second"]
        assert "error" not in result.json()["info"]
        assert not client.is_closed()

    assert client.is_closed(), "the last runtime to close closes the pooled clients"
    assert pooled_clients() == []
