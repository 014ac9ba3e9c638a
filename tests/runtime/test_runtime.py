"""Runtimes share their loop's pooled provider clients: closing one runtime never cuts another's stream,
and the last one to close closes the clients."""

from __future__ import annotations

import asyncio
import contextlib
import sys
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


# A fresh interpreter (the shared SSL context is built once per process): a runtime opens, its
# background work settles, then a model call's client asks for the context. Prints, per context
# built, whether it was built on the event loop's thread.
_SSL_PROBE = """
import asyncio, sys, threading
from pathlib import Path
import httpx2
from agentforge.llm.pool import shared_ssl_context
from agentforge.testing import ScriptedModel, scripted_runtime

built = []
create = httpx2.create_ssl_context
def recording(*args, **kwargs):
    built.append(threading.current_thread() is threading.main_thread())
    return create(*args, **kwargs)
httpx2.create_ssl_context = recording

async def main():
    root = Path(sys.argv[1])
    async with scripted_runtime(root, root / "data", ScriptedModel()) as runtime:
        while runtime.background:
            await asyncio.wait(set(runtime.background))
        shared_ssl_context()
    print(built)

asyncio.run(main())
"""


async def test_the_shared_ssl_context_is_built_once_off_the_event_loop_when_a_runtime_opens(
    tmp_path: Path,
) -> None:
    # Reading the CA bundle is file IO: the first model call would otherwise do it on the loop.
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SSL_PROBE, str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()[-2000:]
    assert out.decode().split() == ["[False]"]
