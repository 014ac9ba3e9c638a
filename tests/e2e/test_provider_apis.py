"""One turn through HTTP per provider API (Azure OpenAI, OpenAI Responses, Google Gemini): reasoning,
text and a tool call stored as parts, the tool result sent back, token counts and cost recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from agentforge.llm import azure_openai, google_gemini
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.gemini_server import FakeGemini, GeminiScript
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.fakes.responses_server import FakeResponses, ResponsesScript

COST = {"input": 2, "output": 8, "cache_read": 0.5}


def provider_config(api: str, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "remote/test-model",
        "provider": {
            "remote": {
                "api": api,
                "options": {"apiKey": "sk-test", **options},
                "models": {"test-model": {"limit": {"context": 128_000, "output": 4096}, "cost": COST}},
            }
        },
        "retry": {"max_attempts": 2},
        "title": False,
    }


async def run_write_turn(live: LiveServer) -> tuple[dict[str, Any], dict[str, Any]]:
    """Prompt for a file write; the two assistant messages (tool step, answer) as stored."""
    session = await live.create_session()
    response = await live.prompt(session["id"], "Write notes.txt with hi.")
    assert response.status_code == 200, response.text
    assert (live.workspace / "notes.txt").read_text() == "hi\n"
    history = (await live.client.get(f"/session/{session['id']}/message")).json()
    assert [m["info"]["role"] for m in history] == ["user", "assistant", "assistant"]
    first, last = history[1], history[2]
    assert [p["text"] for p in first["parts"] if p["type"] == "reasoning"] == ["Plan the write."]
    assert [p["text"] for p in first["parts"] if p["type"] == "text"] == ["Writing it."]
    tool = next(p for p in first["parts"] if p["type"] == "tool")
    assert tool["tool"] == "write" and tool["callID"] == "call_w" and tool["state"]["status"] == "completed"
    assert first["info"]["finish"] == "tool-calls"
    assert [p["text"] for p in last["parts"] if p["type"] == "text"] == ["Done."]
    return first, last


def assert_first_step_tokens(first: dict[str, Any]) -> None:
    """Provider counts: input 500 (200 cached), output 90 (30 reasoning)."""
    assert first["info"]["tokens"] == {
        "total": 590,
        "input": 300,
        "output": 60,
        "reasoning": 30,
        "cache": {"read": 200, "write": 0},
    }
    # USD per 1M: 300*2 + 60*8 + 200*0.5 + 30*8
    assert abs(first["info"]["cost"] - (600 + 480 + 100 + 240) / 1_000_000) < 1e-12


WRITE_ARGS = {"filePath": "notes.txt", "content": "hi\n"}


@pytest_asyncio.fixture
async def azure_live(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str) -> AsyncIterator[LiveServer]:
    config = provider_config("azure", {"baseURL": fake_openai.origin, "apiVersion": "2024-10-21"})
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server
    await azure_openai.close_clients()


async def test_azure_openai_turn(azure_live: LiveServer, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        Script()
        .reasoning("Plan the write.")
        .text("Writing it.")
        .tool_call("write", WRITE_ARGS, call_id="call_w")
        .usage(500, 90, reasoning=30, cached=200)
        .finish(),
        Script().text("Done.").usage(40, 5).finish(),
    )
    first, _ = await run_write_turn(azure_live)
    assert_first_step_tokens(first)
    assert fake_openai.request_paths == ["/openai/deployments/test-model/chat/completions"] * 2
    assert fake_openai.request_queries == ["api-version=2024-10-21"] * 2
    tool_message = fake_openai.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_w"


@pytest_asyncio.fixture
async def fake_responses() -> AsyncIterator[FakeResponses]:
    async with FakeResponses() as fake:
        yield fake


@pytest_asyncio.fixture
async def responses_live(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_responses: FakeResponses, database_url: str
) -> AsyncIterator[LiveServer]:
    config = provider_config("openai-responses", {"baseURL": fake_responses.base_url})
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server


async def test_openai_responses_turn(responses_live: LiveServer, fake_responses: FakeResponses) -> None:
    fake_responses.enqueue(
        ResponsesScript()
        .reasoning("Plan the write.")
        .text("Writing it.")
        .tool_call("write", WRITE_ARGS, call_id="call_w")
        .with_usage(500, 90, reasoning=30, cached=200),
        ResponsesScript().text("Done.").with_usage(40, 5),
    )
    first, _ = await run_write_turn(responses_live)
    assert_first_step_tokens(first)
    reasoning = next(p for p in first["parts"] if p["type"] == "reasoning")
    assert reasoning["metadata"]["openai"]["itemId"].startswith("rs_")
    items = fake_responses.requests[1]["input"]
    call, output = items[-2], items[-1]
    assert call["type"] == "function_call" and call["call_id"] == "call_w" and call["name"] == "write"
    assert output["type"] == "function_call_output" and output["call_id"] == "call_w"


@pytest_asyncio.fixture
async def fake_gemini() -> AsyncIterator[FakeGemini]:
    async with FakeGemini() as fake:
        yield fake


@pytest_asyncio.fixture
async def gemini_live(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_gemini: FakeGemini, database_url: str
) -> AsyncIterator[LiveServer]:
    config = provider_config("google", {"baseURL": fake_gemini.base_url})
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server
    await google_gemini.close_clients()


async def test_google_gemini_turn(gemini_live: LiveServer, fake_gemini: FakeGemini) -> None:
    fake_gemini.enqueue(
        GeminiScript()
        .thought("Plan the write.", chunk_size=100)
        .text("Writing it.")
        .function_call("write", WRITE_ARGS, call_id="call_w")
        .with_usage(500, 60, thoughts=30, cached=200),
        GeminiScript().text("Done.").with_usage(40, 5),
    )
    first, _ = await run_write_turn(gemini_live)
    assert_first_step_tokens(first)
    assert fake_gemini.models == ["test-model"] * 2
    contents = fake_gemini.requests[1]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    response = contents[2]["parts"][0]["functionResponse"]
    assert response["id"] == "call_w" and response["name"] == "write"


async def test_google_gemini_thought_signature_goes_back_on_its_call(
    gemini_live: LiveServer, fake_gemini: FakeGemini
) -> None:
    """Gemini 3 answers 400 unless a signed function call comes back with its signature, on the
    next step of the turn and on later turns (rebuilt from the stored history)."""
    signature = "RW5jcnlwdGVkIHRob3VnaHRz"
    fake_gemini.enqueue(
        GeminiScript()
        .thought("Plan the write.", chunk_size=100)
        .text("Writing it.")
        .function_call("write", WRITE_ARGS, call_id="call_w", thought_signature=signature)
        .with_usage(500, 60, thoughts=30, cached=200),
        GeminiScript().text("Done.").with_usage(40, 5),
        GeminiScript().text("Still there.").with_usage(60, 5),
    )
    first, _ = await run_write_turn(gemini_live)
    tool = next(p for p in first["parts"] if p["type"] == "tool")
    assert tool["metadata"] == {"google": {"thoughtSignature": signature}}
    response = await gemini_live.prompt(first["info"]["sessionID"], "Is it there?")
    assert response.status_code == 200, response.text

    call = {"id": "call_w", "name": "write", "args": WRITE_ARGS}
    expected = {"functionCall": call, "thoughtSignature": signature}
    for request in fake_gemini.requests[1:]:
        model_parts = [part for c in request["contents"] if c["role"] == "model" for part in c["parts"]]
        assert [part for part in model_parts if "functionCall" in part] == [expected]
    assert len(fake_gemini.requests) == 3
