"""A whole multi-step turn through real HTTP: SSE deltas, tool parts, storage, status, seq order."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script, call, reply


async def _run_write_read_answer(live: LiveServer) -> tuple[str, EventCollector, Any, float]:
    session = await live.create_session(title="e2e")
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session['id']}")
    live.fake.chunk_delay = 0.005
    live.fake.enqueue(
        call("write", {"filePath": "notes.txt", "content": "hello forge\n"}),
        call("read", {"filePath": "notes.txt"}),
        Script().text("The file says: hello forge.", chunk_size=3).usage(120, 12).finish("stop"),
    )
    response = await live.prompt(session["id"], "Write notes.txt, read it back, tell me what it says.")
    returned_at = asyncio.get_running_loop().time()
    assert response.status_code == 200, response.text
    await events.wait_for(lambda f: f.type == "session.idle")
    await events.stop()
    return session["id"], events, response.json(), returned_at


async def test_turn_streams_over_sse_and_lands_in_storage(live: LiveServer) -> None:
    session_id, events, reply, returned_at = await _run_write_read_answer(live)

    deltas = events.of_type("message.part.delta")
    assert deltas, "no text deltas were streamed"
    assert min(d.received_at for d in deltas) < returned_at, "deltas must arrive before the POST returns"

    # Each part's first full update precedes its deltas.
    for delta in deltas:
        part_id = delta.properties["partID"]
        first_full = next(
            i
            for i, f in enumerate(events.frames)
            if f.type == "message.part.updated" and f.properties["part"]["id"] == part_id
        )
        assert first_full < events.frames.index(delta)

    # The deltas join to the final text, as stored and as returned.
    text_parts = [p for p in reply["parts"] if p["type"] == "text"]
    assert [p["text"] for p in text_parts] == ["The file says: hello forge."]
    joined = "".join(d.properties["delta"] for d in deltas if d.properties["partID"] == text_parts[0]["id"])
    assert joined == text_parts[0]["text"]
    assert reply["info"]["role"] == "assistant" and reply["info"]["finish"] == "stop"

    # Tool parts go pending -> running -> completed, with outputs.
    tool_states: dict[str, list[str]] = {}
    for frame in events.of_type("message.part.updated"):
        part = frame.properties["part"]
        if part["type"] == "tool":
            states = tool_states.setdefault(part["tool"], [])
            if not states or states[-1] != part["state"]["status"]:
                states.append(part["state"]["status"])
    assert tool_states == {
        "write": ["pending", "running", "completed"],
        "read": ["pending", "running", "completed"],
    }

    # Each step's start is announced before the step's other parts (it commits with the first of
    # them) and is stored first.
    announced = history_of_assistants(reply, events)
    assert len(announced) == 3
    for types in announced:
        assert types[0] == "step-start", types

    # The file exists in the session directory.
    assert (live.workspace / "notes.txt").read_text() == "hello forge\n"

    # Status goes busy -> idle.
    statuses = [f.properties["status"]["type"] for f in events.of_type("session.status")]
    assert statuses[0] == "busy" and statuses[-1] == "idle"

    # GET .../message returns the same history the stream described.
    history = (await live.client.get(f"/session/{session_id}/message")).json()
    roles = [m["info"]["role"] for m in history]
    assert roles == ["user", "assistant", "assistant", "assistant"]
    assert [m["parts"][0]["type"] for m in history[1:]] == ["step-start"] * 3
    final_parts: dict[str, Any] = {}
    for frame in events.of_type("message.part.updated"):
        final_parts[frame.properties["part"]["id"]] = frame.properties["part"]
    stored_parts = {p["id"]: p for m in history for p in m["parts"]}
    assistant_parts = {k: v for k, v in stored_parts.items() if v["messageID"] != history[0]["info"]["id"]}
    assert assistant_parts == {k: v for k, v in final_parts.items() if k in assistant_parts}
    tools = [p for p in stored_parts.values() if p["type"] == "tool"]
    assert {t["tool"]: t["state"]["status"] for t in tools} == {"write": "completed", "read": "completed"}
    read_output = next(t for t in tools if t["tool"] == "read")["state"]["output"]
    assert "1: hello forge" in read_output

    # seq ids are strictly increasing per session.
    seqs = [int(f.id) for f in events.frames if f.id is not None]
    assert seqs and seqs == sorted(set(seqs))

    # The model saw the tool results on later steps.
    second_request = live.fake.requests[1]
    tool_messages = [m for m in second_request["messages"] if m["role"] == "tool"]
    assert "Wrote file successfully" in tool_messages[0]["content"]


def history_of_assistants(reply: Any, events: EventCollector) -> list[list[str]]:
    """The part types each assistant message announced, in the order of their first updates."""
    firsts: dict[str, list[str]] = {}
    seen: set[str] = set()
    for frame in events.of_type("message.part.updated"):
        part = frame.properties["part"]
        if part["id"] in seen or part["messageID"] == reply["info"]["parentID"]:
            continue
        seen.add(part["id"])
        firsts.setdefault(part["messageID"], []).append(part["type"])
    return list(firsts.values())


async def test_usage_and_cost_land_on_message_and_session(live: LiveServer) -> None:
    session = await live.create_session()
    live.fake.enqueue(Script().text("hi").usage(1000, 200, reasoning=50, cached=100).finish("stop"))
    reply = (await live.prompt(session["id"], "hello")).json()
    tokens = reply["info"]["tokens"]
    assert tokens["input"] == 900 and tokens["cache"]["read"] == 100
    assert tokens["output"] == 150 and tokens["reasoning"] == 50
    stored = (await live.client.get(f"/session/{session['id']}")).json()
    assert stored["tokens"]["input"] == 900 and stored["tokens"]["output"] == 150


async def test_resume_with_last_event_id_replays_what_was_missed(live: LiveServer) -> None:
    session = await live.create_session()
    live.fake.enqueue(Script().text("first answer").finish("stop"))
    await live.prompt(session["id"], "one")
    first = EventCollector()
    await first.start(live.client, f"/event?sessionID={session['id']}&after=0")
    await first.wait_for(
        lambda f: f.type == "message.part.updated" and f.properties["part"]["type"] == "step-finish"
    )
    await first.stop()
    replayed = [int(f.id) for f in first.frames if f.id is not None]
    assert replayed == list(range(1, len(replayed) + 1))
    resumed = EventCollector()
    await resumed.start(
        live.client, f"/event?sessionID={session['id']}", **{"Last-Event-ID": str(replayed[2])}
    )
    await resumed.wait_for(lambda f: f.id is not None and int(f.id) == replayed[-1])
    await resumed.stop()
    assert [int(f.id) for f in resumed.frames if f.id is not None] == replayed[3:]


async def _asked(live: LiveServer, session_id: str, text: str) -> dict[str, Any]:
    """The body the model was posted for one prompt answered in one step."""
    live.fake.enqueue(Script().text("ok").finish("stop"))
    response = await live.prompt(session_id, text)
    assert response.status_code == 200, response.text
    return live.fake.requests[-1]


def _description(body: dict[str, Any], tool: str) -> str:
    (description,) = [t["function"]["description"] for t in body["tools"] if t["function"]["name"] == tool]
    return str(description)


def _system(body: dict[str, Any]) -> list[Any]:
    return [m for m in body["messages"] if m["role"] == "system"]


async def test_what_is_reused_across_turns_follows_rule_and_instruction_changes(live: LiveServer) -> None:
    (live.workspace / "AGENTS.md").write_text("Answer in French.\n")
    session = await live.create_session()
    sid = session["id"]
    first = await _asked(live, sid, "one")
    second = await _asked(live, sid, "two")
    # Nothing changed: the same tools and system prompt, and the earlier messages as they were.
    assert second["tools"] == first["tools"] and _system(second) == _system(first)
    assert second["messages"][: len(first["messages"])] == first["messages"]
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert "bash" in names

    assert "- explore: " in _description(first, "task")

    deny = [
        {"permission": "bash", "pattern": "*", "action": "deny"},
        {"permission": "task", "pattern": "explore", "action": "deny"},
    ]
    assert (await live.client.patch(f"/session/{sid}", json={"permission": deny})).status_code == 200
    denied = await _asked(live, sid, "three")
    assert [tool["function"]["name"] for tool in denied["tools"]] == [n for n in names if n != "bash"]
    assert "- explore: " not in _description(denied, "task")
    assert "- general: " in _description(denied, "task")

    allow = [  # appended after the denies
        {"permission": "bash", "pattern": "*", "action": "allow"},
        {"permission": "task", "pattern": "explore", "action": "allow"},
    ]
    assert (await live.client.patch(f"/session/{sid}", json={"permission": allow})).status_code == 200
    (live.workspace / "AGENTS.md").write_text("Answer in German.\n")
    allowed = await _asked(live, sid, "four")
    assert allowed["tools"] == first["tools"]  # as before the deny, although the rules differ
    system = "\n".join(str(m["content"]) for m in _system(allowed))
    assert "Answer in German." in system and "Answer in French." not in system


async def test_an_instruction_file_a_tool_writes_is_in_the_next_steps_system_prompt(live: LiveServer) -> None:
    """The next step's file system look-up starts once the step's tools are done (while its last
    write commits, loop `_read_after`): what they changed is seen by the very next model call."""
    sid = (await live.create_session())["id"]
    live.fake.enqueue(
        call("write", {"filePath": "AGENTS.md", "content": "Answer in Latin.\n"}), reply("Done.")
    )
    response = await live.prompt(sid, "leave yourself an instruction")
    assert response.status_code == 200, response.text
    first, second = live.fake.requests[-2:]
    assert "Answer in Latin." not in str(_system(first))
    assert "Answer in Latin." in str(_system(second))
