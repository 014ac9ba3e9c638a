"""A turn through HTTP against the fake Anthropic Messages server (provider `api: "anthropic"`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from agentforge.llm import anthropic_messages
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.anthropic_server import AnthropicScript, FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI


def anthropic_config(fake: FakeAnthropic) -> dict[str, Any]:
    return {
        "model": "claude/claude-test",
        "provider": {
            "claude": {
                "api": "anthropic",
                "options": {"baseURL": fake.base_url, "apiKey": "sk-ant-test"},
                "models": {
                    "claude-test": {
                        "limit": {"context": 200_000, "output": 8192},
                        "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
                    }
                },
            }
        },
        "retry": {"max_attempts": 2},
        "title": False,
    }


@pytest_asyncio.fixture
async def claude_live(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_anthropic: FakeAnthropic, database_url: str
) -> AsyncIterator[LiveServer]:
    config = anthropic_config(fake_anthropic)
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server
    await anthropic_messages.close_clients()


async def test_turn_with_thinking_tool_call_and_cache_usage(
    claude_live: LiveServer, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.enqueue(
        AnthropicScript()
        .thinking("The user wants a file.", signature="sig-abc")
        .text("Writing it.")
        .tool_use("write", {"filePath": "notes.txt", "content": "hi\n"}, call_id="toolu_w")
        .usage(120, 60, cache_read=2000, cache_write=300),
        AnthropicScript().text("Done: notes.txt written.").usage(40, 10, cache_read=2300),
    )
    session = await claude_live.create_session()
    response = await claude_live.prompt(session["id"], "Write notes.txt with hi.")
    assert response.status_code == 200, response.text
    assert (claude_live.workspace / "notes.txt").read_text() == "hi\n"

    history = (await claude_live.client.get(f"/session/{session['id']}/message")).json()
    assert [m["info"]["role"] for m in history] == ["user", "assistant", "assistant"]
    first, last = history[1], history[2]

    reasoning = [p for p in first["parts"] if p["type"] == "reasoning"]
    assert [p["text"] for p in reasoning] == ["The user wants a file."]
    assert reasoning[0]["metadata"] == {"anthropic": {"signature": "sig-abc"}}
    assert [p["text"] for p in first["parts"] if p["type"] == "text"] == ["Writing it."]
    tool = next(p for p in first["parts"] if p["type"] == "tool")
    assert tool["tool"] == "write" and tool["callID"] == "toolu_w"
    assert tool["state"]["status"] == "completed"
    assert first["info"]["finish"] == "tool-calls"

    tokens = first["info"]["tokens"]
    assert tokens["input"] == 120 and tokens["output"] == 60
    assert tokens["cache"] == {"read": 2000, "write": 300}
    # USD per 1M: 120*3 + 60*15 + 2000*0.3 + 300*3.75
    assert abs(first["info"]["cost"] - (360 + 900 + 600 + 1125) / 1_000_000) < 1e-12
    assert last["info"]["tokens"]["cache"] == {"read": 2300, "write": 0}
    assert [p["text"] for p in last["parts"] if p["type"] == "text"] == ["Done: notes.txt written."]

    # The second call sent the signed thinking back, and the tool result as a user tool_result block.
    second = fake_anthropic.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    thinking = second[1]["content"][0]
    assert thinking == {"type": "thinking", "thinking": "The user wants a file.", "signature": "sig-abc"}
    result = second[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_w"
