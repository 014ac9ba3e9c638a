"""Commands through HTTP: listing, template expansion, @file references, subtask mode, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, reply

REVIEW_MD = """---
description: Review a file
---
Review @notes.txt and the @docs folder carefully. $ARGUMENTS
"""


@pytest_asyncio.fixture
async def live(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str) -> AsyncIterator[LiveServer]:
    config = {
        **fake_provider_config(fake_openai),
        "agent": {"helper": {"mode": "subagent", "description": "Investigates"}},
        "command": {
            "greet": {"template": "Say hello to $1 and $2.", "description": "Greets two people"},
            "echo": {"template": "Repeat after me:"},
            "delegate": {"template": "Investigate $ARGUMENTS", "agent": "helper", "description": "Hand off"},
            "today": {"template": "Today is !`echo sunny-day` here."},
        },
    }
    workspace = tmp_path / "workspace"
    (workspace / ".agentforge" / "commands").mkdir(parents=True)
    (workspace / ".agentforge" / "commands" / "review.md").write_text(REVIEW_MD)
    (workspace / "notes.txt").write_text("remember the milk\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text("# Guide\n")
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server


def _last_user_text(live: LiveServer) -> str:
    message = live.fake.requests[-1]["messages"][-1]
    assert message["role"] == "user"
    content = message["content"]
    return content if isinstance(content, str) else "\n".join(c.get("text", "") for c in content)


async def _run(live: LiveServer, sid: str, command: str, arguments: str = "", **extra: Any) -> dict[str, Any]:
    body = {"command": command, "arguments": arguments, **extra}
    response = await live.client.post(f"/session/{sid}/command", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_commands_are_listed_with_their_placeholders(live: LiveServer) -> None:
    response = await live.client.get("/command")
    assert response.status_code == 200
    commands = {c["name"]: c for c in response.json()}
    assert set(commands) == {"greet", "echo", "delegate", "today", "review"}
    assert commands["greet"] == {
        "name": "greet",
        "source": "command",
        "template": "Say hello to $1 and $2.",
        "description": "Greets two people",
        "hints": ["$1", "$2"],
    }
    assert commands["review"]["description"] == "Review a file"
    assert commands["review"]["hints"] == ["$ARGUMENTS"]
    assert commands["delegate"]["agent"] == "helper"


async def test_positional_arguments_and_quoting(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    live.fake.enqueue(reply("Hello!"))
    result = await _run(live, sid, "greet", 'Ann "Bob Smith" and friends')
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Hello!"]
    # The highest placeholder takes the rest of the arguments.
    assert _last_user_text(live) == "Say hello to Ann and Bob Smith and friends."
    executed = await events.wait_for(lambda f: f.type == "command.executed")
    assert executed.properties == {
        "name": "greet",
        "sessionID": sid,
        "arguments": 'Ann "Bob Smith" and friends',
        "messageID": result["info"]["id"],
    }
    await events.stop()


async def test_arguments_are_appended_when_the_template_has_no_placeholder(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(reply("ok"))
    await _run(live, sid, "echo", "the quick fox")
    assert _last_user_text(live) == "Repeat after me:\n\nthe quick fox"


async def test_file_references_become_file_parts(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(reply("Reviewed."))
    await _run(live, sid, "review", "please")
    messages = (await live.client.get(f"/session/{sid}/message")).json()
    files = [p for p in messages[0]["parts"] if p["type"] == "file"]
    # Parts resolve concurrently: their order is not the order of the references.
    assert {(f["filename"], f["mime"], f["url"]) for f in files} == {
        ("notes.txt", "text/plain", (live.workspace / "notes.txt").resolve().as_uri()),
        ("docs", "application/x-directory", (live.workspace / "docs").resolve().as_uri()),
    }
    sent = _last_user_text(live)
    assert sent.startswith("Review @notes.txt and the @docs folder carefully. please")
    assert "remember the milk" in sent and "guide.md" in sent


async def test_shell_snippets_are_replaced_by_their_output(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(reply("Nice."))
    await _run(live, sid, "today")
    assert _last_user_text(live) == "Today is sunny-day here."


async def test_a_subagent_command_runs_as_a_subtask(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(reply("Found the leak"), reply("The helper found the leak."))
    result = await _run(live, sid, "delegate", "the memory leak")
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["The helper found the leak."]

    user, synthetic, summarize, final = (await live.client.get(f"/session/{sid}/message")).json()
    [subtask] = user["parts"]
    assert subtask["type"] == "subtask"
    assert (subtask["agent"], subtask["command"], subtask["prompt"]) == (
        "helper",
        "delegate",
        "Investigate the memory leak",
    )
    assert user["info"]["agent"] == "build"  # the caller's agent keeps the conversation
    task = next(p for p in synthetic["parts"] if p["type"] == "tool")
    assert task["state"]["status"] == "completed" and "Found the leak" in task["state"]["output"]
    assert summarize["info"]["role"] == "user"
    assert (
        summarize["parts"][0]["text"] == "Summarize the task tool output above and continue with your task."
    )
    assert final["info"]["role"] == "assistant"
    assert live.fake.requests[0]["messages"][-1] == {"role": "user", "content": "Investigate the memory leak"}


async def test_an_unknown_command_is_refused_with_the_list(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    response = await live.client.post(f"/session/{sid}/command", json={"command": "nope", "arguments": ""})
    assert response.status_code == 400
    message = response.json()["data"]["message"]
    assert message.startswith('Command not found: "nope". Available commands: ')
    assert "greet" in message and "review" in message
    assert (await live.client.get(f"/session/{sid}/message")).json() == []


async def test_a_command_for_an_unknown_session_is_404(live: LiveServer) -> None:
    response = await live.client.post(
        "/session/ses_doesnotexist00000000000000/command", json={"command": "greet", "arguments": ""}
    )
    assert response.status_code == 404
