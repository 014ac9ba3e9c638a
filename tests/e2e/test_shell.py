"""User-run shell commands through HTTP: recorded as a bash tool call, streamed, refused while busy,
aborted, and a prompt sent meanwhile runs after it."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.e2e.harness import EventCollector, Frame, LiveServer
from tests.fakes.openai_server import Script, reply


async def _shell(live: LiveServer, sid: str, command: str, **extra: Any) -> Any:
    return await live.client.post(
        f"/session/{sid}/shell", json={"agent": "build", "command": command, **extra}
    )


def _bash_running(frame: Frame, needle: str = "") -> bool:
    part = frame.properties.get("part", {})
    state = part.get("state", {})
    return (
        frame.type == "message.part.updated"
        and part.get("tool") == "bash"
        and state.get("status") == "running"
        and needle in (state.get("metadata") or {}).get("output", "")
    )


async def test_a_shell_command_is_recorded_as_a_bash_call(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    response = await _shell(live, sid, "echo hello; echo oops >&2; pwd")
    assert response.status_code == 200, response.text
    result = response.json()

    assert result["info"]["role"] == "assistant" and result["info"]["agent"] == "build"
    assert result["info"]["time"]["completed"] is not None
    [part] = result["parts"]
    assert part["tool"] == "bash" and part["state"]["status"] == "completed"
    assert part["state"]["input"] == {"command": "echo hello; echo oops >&2; pwd"}
    expected = f"hello\noops\n{live.workspace}\n"
    assert part["state"]["output"] == expected
    assert part["state"]["metadata"] == {"output": expected, "description": ""}
    assert part["state"]["title"] == ""

    user, assistant = (await live.client.get(f"/session/{sid}/message")).json()
    assert user["parts"][0]["text"] == "The following tool was executed by the user"
    assert user["parts"][0]["synthetic"] is True
    assert assistant["info"]["parentID"] == user["info"]["id"]
    assert (await live.client.get("/session/status")).json() == {}
    assert live.fake.requests == []  # the model is not asked


async def test_the_output_streams_while_the_command_runs(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    marker = live.workspace / "go"
    shell = asyncio.create_task(
        _shell(live, sid, f"echo first; while [ ! -e {marker} ]; do sleep 0.02; done")
    )
    await events.wait_for(lambda f: _bash_running(f, "first"))
    assert not shell.done()
    busy = (await live.client.get("/session/status")).json()
    assert busy == {sid: {"type": "busy"}}
    marker.touch()
    result = (await asyncio.wait_for(shell, 10)).json()
    assert result["parts"][0]["state"]["output"] == "first\n"
    await events.stop()


async def test_a_shell_is_refused_while_a_turn_runs(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("thinking").pause(gate).finish())
    prompt = asyncio.create_task(live.prompt(sid, "think"))
    await events.wait_for(lambda f: f.type == "message.part.delta")

    refused = await _shell(live, sid, "echo never")
    assert refused.status_code == 409
    assert refused.json()["name"] == "SessionBusyError"
    gate.set()
    await asyncio.wait_for(prompt, 10)
    assert (await _shell(live, sid, "echo now")).status_code == 200
    await events.stop()


async def test_a_second_shell_is_refused_while_one_runs(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    first = asyncio.create_task(_shell(live, sid, "sleep 30"))
    await events.wait_for(_bash_running)
    assert (await _shell(live, sid, "echo second")).status_code == 409
    await live.client.post(f"/session/{sid}/abort")
    await asyncio.wait_for(first, 10)
    await events.stop()


async def test_abort_kills_the_command_and_completes_the_part(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    shell = asyncio.create_task(_shell(live, sid, "echo started; sleep 30"))
    await events.wait_for(lambda f: _bash_running(f, "started"))
    assert (await live.client.post(f"/session/{sid}/abort")).json() is True
    response = await asyncio.wait_for(shell, 10)
    assert response.status_code == 200
    [part] = response.json()["parts"]
    assert part["state"]["status"] == "completed"
    assert part["state"]["output"] == "started\n\n\n<metadata>\nUser aborted the command\n</metadata>"
    await events.wait_for(lambda f: f.type == "session.status" and f.properties["status"]["type"] == "idle")
    assert (await live.client.get("/session/status")).json() == {}
    await events.stop()


async def test_a_prompt_during_a_shell_runs_after_it(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    marker = live.workspace / "go"
    shell = asyncio.create_task(
        _shell(live, sid, f"while [ ! -e {marker} ]; do sleep 0.02; done; echo built")
    )
    await events.wait_for(_bash_running)
    live.fake.enqueue(reply("The build printed 'built'."))
    prompt = asyncio.create_task(live.prompt(sid, "What did it print?"))

    # The prompt is stored while the shell still runs (it cannot end before the marker exists); the
    # model then sees the shell's finished output, so the turn ran after it (checked below).
    def stored(frame: Frame) -> bool:
        part = frame.properties.get("part", {})
        return frame.type == "message.part.updated" and part.get("text") == "What did it print?"

    await events.wait_for(stored)
    assert live.fake.requests == [] and not prompt.done()
    marker.touch()
    await asyncio.wait_for(shell, 10)
    result = (await asyncio.wait_for(prompt, 10)).json()

    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["The build printed 'built'."]
    [request] = live.fake.requests
    tool_results = [m for m in request["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_results] == ["built\n"]
    await events.stop()


async def test_bad_shell_requests(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    unknown_agent = await live.client.post(f"/session/{sid}/shell", json={"agent": "ghost", "command": "ls"})
    assert unknown_agent.status_code == 400
    assert "ghost" in unknown_agent.json()["data"]["message"]
    missing = await live.client.post(f"/session/{sid}/shell", json={"command": "ls"})
    assert missing.status_code == 400
    gone = await live.client.post(
        "/session/ses_doesnotexist00000000000000/shell", json={"agent": "build", "command": "ls"}
    )
    assert gone.status_code == 404
    assert (await live.client.get(f"/session/{sid}/message")).json() == []


async def test_a_message_id_of_another_session_is_refused_before_the_command_runs(live: LiveServer) -> None:
    first = (await live.create_session())["id"]
    assert (await _shell(live, first, "echo one")).status_code == 200
    [user, _] = (await live.client.get(f"/session/{first}/message")).json()
    taken = user["info"]["id"]
    before = (await live.client.get(f"/session/{first}/message")).content

    second = (await live.create_session())["id"]
    marker = live.workspace / "ran.txt"
    response = await _shell(live, second, f"touch {marker}", messageID=taken)

    assert response.status_code == 400, response.text
    assert response.json()["data"]["message"] == f"messageID {taken} cannot be used: send a new msg_ id"
    assert not marker.exists()
    assert (await live.client.get(f"/session/{second}/message")).json() == []
    assert (await live.client.get(f"/session/{first}/message")).content == before
    assert (await live.client.get("/session/status")).json() == {}
    # The same session may reuse its own id: that is an update of its own message, not a collision.
    again = await _shell(live, first, "echo two", messageID=taken)
    assert again.status_code == 200, again.text
