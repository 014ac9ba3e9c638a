"""The fake provider itself: real chunks, keep-alive, scripting, faults."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from openai.types.chat import ChatCompletionChunk

from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

BODY = {"model": "m1", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def chunks(client: httpx2.AsyncClient, fake: FakeOpenAI, body: dict[str, Any] = BODY) -> list[Any]:
    """Every `data:` payload of one streamed response ("[DONE]" kept as a string)."""
    async with client.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [_payload(line) async for line in _data_lines(response)]


async def _data_lines(response: httpx2.Response) -> AsyncIterator[str]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield line[6:]


def _payload(data: str) -> Any:
    return data if data == "[DONE]" else json.loads(data)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=5) as http:
        yield http


async def test_starts_fast_on_a_free_loopback_port() -> None:
    started = time.perf_counter()
    async with FakeOpenAI() as fake:
        assert time.perf_counter() - started < 0.1
        assert fake.base_url.startswith("http://127.0.0.1:") and fake.base_url.endswith("/v1")


async def test_reply_streams_real_openai_chunks(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.enqueue(reply("Hello there"))
    payloads = await chunks(client, fake)

    assert payloads[-1] == "[DONE]"
    parsed = [ChatCompletionChunk.model_validate(p) for p in payloads[:-1]]  # the SDK's own schema
    assert {c.id for c in parsed} == {parsed[0].id}
    assert all(c.model == "m1" for c in parsed)
    assert parsed[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in parsed if c.choices) == "Hello there"
    assert parsed[-2].choices[0].finish_reason == "stop"
    assert parsed[-1].choices == []
    assert parsed[-1].usage is not None
    assert (parsed[-1].usage.prompt_tokens, parsed[-1].usage.completion_tokens) == (10, 5)
    assert fake.requests == [BODY]


async def test_tool_calls_stream_by_index(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.enqueue(
        Script().tool_call("read", {"path": "a.txt"}, call_id="call_1").tool_call("glob", '{"pattern":"*"}')
    )
    payloads = await chunks(client, fake)
    parsed = [ChatCompletionChunk.model_validate(p) for p in payloads[:-1]]

    arguments: dict[int, str] = {}
    ids: dict[int, str] = {}
    for chunk in parsed:
        deltas = (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []
        for delta in deltas:
            piece = delta.function.arguments if delta.function and delta.function.arguments else ""
            arguments[delta.index] = arguments.get(delta.index, "") + piece
            if delta.id:
                ids[delta.index] = delta.id
    assert json.loads(arguments[0]) == {"path": "a.txt"}
    assert json.loads(arguments[1]) == {"pattern": "*"}
    assert ids[0] == "call_1" and ids[1].startswith("call_")
    assert parsed[-1].choices[0].finish_reason == "tool_calls"  # default when the script has tool calls


async def test_call_helper_and_usage_details(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.enqueue(call("bash", {"command": "ls"}), Script().text("x").usage(7, 3, reasoning=2, cached=4))
    await chunks(client, fake)
    usage = (await chunks(client, fake))[-2]["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 4
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 2
    assert usage["total_tokens"] == 10


async def test_keep_alive_reuses_the_connection(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.enqueue(reply("one"), reply("two"))
    assert fake.pending() == 2
    await chunks(client, fake)
    assert fake.pending() == 1
    await chunks(client, fake, {**BODY, "model": "m2"})
    assert fake.connections == 1
    assert [r["model"] for r in fake.requests] == ["m1", "m2"]


async def test_empty_queue_is_http_500(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    response = await client.post(f"{fake.base_url}/chat/completions", json=BODY)
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "fake provider: no script left"
    assert fake.requests == [BODY]  # still recorded


async def test_error_status_with_headers(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.enqueue(Script().error_status(429, {"error": {"message": "slow"}}, {"retry-after": "2"}))
    response = await client.post(f"{fake.base_url}/chat/completions", json=BODY)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json() == {"error": {"message": "slow"}}


async def test_models_endpoint(client: httpx2.AsyncClient) -> None:
    async with FakeOpenAI(models=["a", "b"]) as fake:
        response = await client.get(f"{fake.base_url}/models")
    assert [m["id"] for m in response.json()["data"]] == ["a", "b"]


async def test_chunk_delay_paces_the_stream(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.chunk_delay = 0.02
    fake.enqueue(reply("abcdefgh"))  # role, 2 text, finish, usage, [DONE]: 5 gaps
    started = time.perf_counter()
    await chunks(client, fake)
    assert time.perf_counter() - started >= 0.1


async def test_pause_holds_the_stream_until_the_gate_opens(
    fake: FakeOpenAI, client: httpx2.AsyncClient
) -> None:
    gate = asyncio.Event()
    fake.enqueue(Script().text("before").pause(gate).text("after"))
    async with client.stream("POST", f"{fake.base_url}/chat/completions", json=BODY) as response:
        lines = _data_lines(response)
        seen = [json.loads(await anext(lines)) for _ in range(3)]  # role + "befo" + "re"
        assert "".join(c["choices"][0]["delta"]["content"] for c in seen) == "before"
        pending = asyncio.ensure_future(anext(lines))
        await asyncio.sleep(0.05)
        assert not pending.done()
        gate.set()
        assert json.loads(await pending)["choices"][0]["delta"]["content"] == "afte"


async def test_drop_closes_mid_stream(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.enqueue(Script().text("partial").drop(), reply("next"))
    with pytest.raises(httpx2.RemoteProtocolError):
        await chunks(client, fake)
    assert (await chunks(client, fake))[-1] == "[DONE]"  # the next request works
    assert fake.connections == 2


async def test_streamed_error_and_raw_chunks(fake: FakeOpenAI, client: httpx2.AsyncClient) -> None:
    fake.enqueue(Script().raw("{broken").error_event("boom", code="server_overloaded"))
    async with client.stream("POST", f"{fake.base_url}/chat/completions", json=BODY) as response:
        data = [line async for line in _data_lines(response)]
    assert data[1] == "{broken"
    assert json.loads(data[2]) == {
        "error": {"message": "boom", "type": "server_error", "code": "server_overloaded"}
    }
    assert len(data) == 3  # nothing after the error: no finish, no [DONE]


async def test_stop_does_not_hang_on_a_paused_stream(client: httpx2.AsyncClient) -> None:
    fake = FakeOpenAI()
    await fake.start()
    fake.enqueue(Script().text("x").pause(asyncio.Event()))
    async with client.stream("POST", f"{fake.base_url}/chat/completions", json=BODY) as response:
        lines = _data_lines(response)
        await anext(lines)
        await asyncio.wait_for(fake.stop(), 1)
