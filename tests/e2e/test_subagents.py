"""Subagents through HTTP: the task tool runs a child session, abort reaches it, task_id resumes it,
and subtask parts in user input run before the model is asked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from tests.e2e.harness import EventCollector, Frame, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

HELPER = {"mode": "subagent", "description": "Digs through the code for answers"}


@pytest_asyncio.fixture
async def live(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str) -> AsyncIterator[LiveServer]:
    config = {
        **fake_provider_config(fake_openai),
        "agent": {
            "helper": HELPER,
            "forbidden": {"mode": "subagent", "description": "Never offered"},
            # The model may not pick `forbidden`; a subtask part may (it was the user's choice).
            "build": {"permission": {"task": {"forbidden": "deny"}}},
        },
    }
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server


def _task_call(**extra: Any) -> Script:
    arguments = {
        "description": "Find the parser",
        "prompt": "Where is the parser?",
        "subagent_type": "helper",
    }
    return call("task", {**arguments, **extra})


def _running_task(frame: Frame) -> bool:
    part = frame.properties.get("part", {})
    state = part.get("state", {})
    return (
        frame.type == "message.part.updated"
        and part.get("tool") == "task"
        and state.get("status") == "running"
        and "sessionId" in (state.get("metadata") or {})
    )


def _tool(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in result["parts"] if p["type"] == "tool" and p["tool"] == name)


async def _messages(live: LiveServer, sid: str) -> list[dict[str, Any]]:
    response = await live.client.get(f"/session/{sid}/message")
    assert response.status_code == 200
    messages: list[dict[str, Any]] = response.json()
    return messages


def _tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


async def test_a_subagent_runs_in_a_child_session_the_parent_can_follow(live: LiveServer) -> None:
    package = live.workspace / "pkg"
    package.mkdir()
    parent = (await live.create_session(directory=str(package)))["id"]
    events = EventCollector()
    await events.start(live.client)  # unfiltered: the child's events share the stream
    gate = asyncio.Event()
    live.fake.enqueue(
        _task_call(),
        Script().pause(gate).text("The parser is in src/parse.py").usage(10, 5).finish(),
        reply("It is in src/parse.py."),
    )
    prompt = asyncio.create_task(live.prompt(parent, "Find the parser"))

    running = await events.wait_for(_running_task)
    child = running.properties["part"]["state"]["metadata"]["sessionId"]
    assert running.properties["sessionID"] == parent
    assert running.properties["part"]["state"]["title"] == "Find the parser"
    children = (await live.client.get(f"/session/{parent}/children")).json()
    assert [c["id"] for c in children] == [child]
    assert children[0]["parentID"] == parent
    assert children[0]["title"] == "Find the parser (@helper subagent)"
    assert children[0]["directory"] == str(package)
    denied = {(r["permission"], r["action"]) for r in children[0]["permission"]}
    assert denied == {("todowrite", "deny"), ("todoread", "deny"), ("task", "deny")}
    assert not prompt.done()
    gate.set()
    result = (await asyncio.wait_for(prompt, 10)).json()

    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["It is in src/parse.py."]
    child_messages = await _messages(live, child)
    assert [m["info"]["role"] for m in child_messages] == ["user", "assistant"]
    assert child_messages[1]["info"]["agent"] == "helper"
    [child_text] = [p["text"] for p in child_messages[1]["parts"] if p["type"] == "text"]
    assert child_text == "The parser is in src/parse.py"
    tool = _tool((await _messages(live, parent))[1], "task")
    assert tool["state"]["status"] == "completed"
    assert tool["state"]["output"] == (
        f"task_id: {child} (for resuming to continue this task if needed)\n\n"
        "<task_result>\nThe parser is in src/parse.py\n</task_result>"
    )
    assert tool["state"]["metadata"]["sessionId"] == child
    assert tool["state"]["metadata"]["model"] == {"modelID": "test-model", "providerID": "fake"}

    parent_request, child_request, _ = live.fake.requests
    [task_spec] = [t for t in parent_request["tools"] if t["function"]["name"] == "task"]
    assert "- helper: Digs through the code for answers" in task_spec["function"]["description"]
    assert "forbidden" not in task_spec["function"]["description"]
    assert {"task", "todowrite", "todoread"}.isdisjoint(_tool_names(child_request))
    assert child_request["messages"][-1] == {"role": "user", "content": "Where is the parser?"}
    child_events = [f for f in events.frames if f.properties.get("sessionID") == child]
    assert any(f.type == "message.part.delta" for f in child_events)
    await events.stop()


async def test_aborting_the_parent_cancels_the_child(live: LiveServer) -> None:
    parent = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client)
    never = asyncio.Event()
    live.fake.enqueue(_task_call(), Script().text("Looking").pause(never).finish())
    prompt = asyncio.create_task(live.prompt(parent, "Find the parser"))
    child = (await events.wait_for(_running_task)).properties["part"]["state"]["metadata"]["sessionId"]
    await events.wait_for(lambda f: f.type == "message.part.delta" and f.properties["sessionID"] == child)

    assert (await live.client.post(f"/session/{parent}/abort")).json() is True
    result = (await asyncio.wait_for(prompt, 10)).json()
    never.set()

    assert result["info"]["error"]["name"] == "MessageAbortedError"
    assert _tool(result, "task")["state"]["status"] == "error"
    [_, child_reply] = await _messages(live, child)
    assert child_reply["info"]["error"]["name"] == "MessageAbortedError"
    assert child_reply["info"]["time"]["completed"] is not None
    await events.wait_for(
        lambda f: (
            f.type == "session.status"
            and f.properties["sessionID"] == child
            and f.properties["status"]["type"] == "idle"
        )
    )
    assert (await live.client.get("/session/status")).json() == {}
    await events.stop()


async def test_task_id_resumes_the_same_child(live: LiveServer) -> None:
    parent = (await live.create_session())["id"]
    live.fake.enqueue(_task_call(), reply("first finding"), reply("Noted."))
    assert (await live.prompt(parent, "Find the parser")).status_code == 200
    [child] = [c["id"] for c in (await live.client.get(f"/session/{parent}/children")).json()]

    live.fake.enqueue(
        _task_call(task_id=child, prompt="And the lexer?"), reply("second finding"), reply("Done.")
    )
    assert (await live.prompt(parent, "Keep going")).status_code == 200

    assert [c["id"] for c in (await live.client.get(f"/session/{parent}/children")).json()] == [child]
    child_messages = await _messages(live, child)
    assert [m["info"]["role"] for m in child_messages] == ["user", "assistant", "user", "assistant"]
    resumed_request = live.fake.requests[4]
    contents = [m.get("content") for m in resumed_request["messages"]]
    assert "first finding" in str(contents) and "And the lexer?" in str(contents)
    tool = _tool((await _messages(live, parent))[-2], "task")
    assert tool["state"]["output"].startswith(f"task_id: {child} ")
    assert "second finding" in tool["state"]["output"]


async def test_task_id_of_another_sessions_child_is_refused(live: LiveServer) -> None:
    other = (await live.create_session())["id"]
    stranger = (await live.create_session(parentID=other))["id"]
    parent = (await live.create_session())["id"]
    live.fake.enqueue(_task_call(task_id=stranger), reply("Could not."))
    result = (await live.prompt(parent, "Resume it")).json()
    tool = _tool((await _messages(live, parent))[1], "task")
    assert tool["state"]["status"] == "error"
    assert "is not a task of this session" in tool["state"]["error"]
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Could not."]
    assert (await _messages(live, stranger)) == []


async def test_a_denied_subagent_is_refused_and_an_unknown_one_named(live: LiveServer) -> None:
    parent = (await live.create_session())["id"]
    live.fake.enqueue(
        _task_call(subagent_type="forbidden"), _task_call(subagent_type="nobody"), reply("Giving up.")
    )
    result = (await live.prompt(parent, "Try them")).json()
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Giving up."]
    _, denied, unknown, _ = await _messages(live, parent)
    denied_state = _tool(denied, "task")["state"]
    assert denied_state["status"] == "error" and "task 'forbidden' deny" in denied_state["error"]
    unknown_state = _tool(unknown, "task")["state"]
    assert unknown_state["error"] == "Unknown agent type: nobody is not a valid agent type"
    assert (await live.client.get(f"/session/{parent}/children")).json() == []


async def test_a_subtask_part_runs_before_the_model_is_asked(live: LiveServer) -> None:
    parent = (await live.create_session())["id"]
    live.fake.enqueue(reply("Child says hi"), reply("The helper said hi."))
    subtask = {"type": "subtask", "prompt": "Say hi", "description": "Greeting", "agent": "forbidden"}
    response = await live.client.post(f"/session/{parent}/message", json={"parts": [subtask]})
    assert response.status_code == 200, response.text

    user, synthetic, final = await _messages(live, parent)
    assert user["parts"][0]["type"] == "subtask"
    assert synthetic["info"]["agent"] == "forbidden" and synthetic["info"]["finish"] == "tool-calls"
    tool = _tool(synthetic, "task")
    assert tool["state"]["status"] == "completed"
    assert tool["state"]["input"] == {
        "prompt": "Say hi",
        "description": "Greeting",
        "subagent_type": "forbidden",
    }
    assert "<task_result>\nChild says hi\n</task_result>" in tool["state"]["output"]
    assert [p["text"] for p in final["parts"] if p["type"] == "text"] == ["The helper said hi."]
    [child] = (await live.client.get(f"/session/{parent}/children")).json()
    assert child["title"] == "Greeting (@forbidden subagent)"
    # The model's turn after the subtask saw the task call and its result.
    last = live.fake.requests[-1]["messages"]
    assert any(m["role"] == "tool" and "Child says hi" in m["content"] for m in last)


async def test_aborting_a_subtask_marks_it_cancelled(live: LiveServer) -> None:
    parent = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client)
    never = asyncio.Event()
    live.fake.enqueue(Script().text("Working").pause(never).finish())
    subtask = {"type": "subtask", "prompt": "Work", "description": "Long job", "agent": "helper"}
    prompt = asyncio.create_task(live.client.post(f"/session/{parent}/message", json={"parts": [subtask]}))
    await events.wait_for(_running_task)
    await events.wait_for(lambda f: f.type == "message.part.delta")
    await live.client.post(f"/session/{parent}/abort")
    await asyncio.wait_for(prompt, 10)
    never.set()

    _, synthetic = await _messages(live, parent)
    tool = _tool(synthetic, "task")
    assert tool["state"]["status"] == "error" and tool["state"]["error"] == "Cancelled"
    assert synthetic["info"]["finish"] == "tool-calls"
    [child] = (await live.client.get(f"/session/{parent}/children")).json()
    [_, child_reply] = await _messages(live, child["id"])
    assert child_reply["info"]["error"]["name"] == "MessageAbortedError"
    await events.stop()
