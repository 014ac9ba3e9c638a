"""Crash recovery: a turn left running by a dead process is closed when the server starts again.

The crash is real: the turn is written into the database through the store, and the store is closed
without the processor's cleanup ever running. Then the real app starts on that database.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentforge.config import Settings, load_settings
from agentforge.model import ids
from agentforge.model.errors import api_error
from agentforge.model.events import DEFAULT_TENANT, MESSAGE_UPDATED, PART_UPDATED, PERMISSION_ASKED, Event
from agentforge.model.message import AssistantMessage, AssistantPath, AssistantTime, UserMessage, UserTime
from agentforge.model.part import (
    ModelRef,
    Part,
    ReasoningPart,
    RunningTime,
    SpanTime,
    StepStartPart,
    TextPart,
    ToolPart,
    ToolStatePending,
    ToolStateRunning,
)
from agentforge.model.permission import PermissionRequestInfo, PermissionRequestTime
from agentforge.model.session import Session
from agentforge.runtime.recovery import INTERRUPTED_TURN_MESSAGE, close_interrupted_turns
from agentforge.runtime.runtime import Runtime
from agentforge.runtime.sandboxing import command_ledger
from agentforge.session.tool_part import ABORTED_MESSAGE
from agentforge.store import Store
from agentforge.store.store import SecondServerError
from agentforge.testing import ScriptedModel
from agentforge.tools.command_ledger import TOKEN_VARIABLE, CommandLedger
from tests.databases import owner_url_for
from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply
from tests.store.builders import new_session, now_ms, session_created
from tests.tools.test_command_ledger import dead_instance_entry, exited, start_group

STARTED = 1_700_000_000_000
OUTPUT_PREVIEW = "Downloading 1/3\n"


@dataclass
class CrashedTurn:
    session: Session
    user: UserMessage
    reply: AssistantMessage
    step: StepStartPart
    text: TextPart
    quiet_bash: ToolPart  # running, nothing printed yet
    chatty_bash: ToolPart  # running, with the output preview bash publishes as it goes


def _message_event(message: UserMessage | AssistantMessage, tenant_id: str) -> Event:
    props = {"sessionID": message.session_id, "info": message.wire()}
    return Event(MESSAGE_UPDATED, props, session_id=message.session_id, tenant_id=tenant_id)


def _part_event(part: Part, tenant_id: str) -> Event:
    props = {"sessionID": part.session_id, "part": part.wire(), "time": now_ms()}
    return Event(PART_UPDATED, props, session_id=part.session_id, tenant_id=tenant_id)


def _user(session_id: str) -> UserMessage:
    return UserMessage(
        id=ids.ascending("msg"),
        session_id=session_id,
        time=UserTime(created=STARTED),
        agent="build",
        model=ModelRef(provider_id="fake", model_id="test-model"),
    )


def _assistant(session_id: str, parent_id: str, directory: Path) -> AssistantMessage:
    return AssistantMessage(
        id=ids.ascending("msg"),
        session_id=session_id,
        time=AssistantTime(created=STARTED + 1),
        parent_id=parent_id,
        model_id="test-model",
        provider_id="fake",
        mode="build",
        agent="build",
        path=AssistantPath(cwd=str(directory), root=str(directory)),
    )


def _running_bash(message: AssistantMessage, command: str, metadata: dict[str, Any] | None) -> ToolPart:
    return ToolPart(
        id=ids.ascending("prt"),
        session_id=message.session_id,
        message_id=message.id,
        call_id=f"call_{ids.ascending('prt')[-12:]}",
        tool="bash",
        state=ToolStateRunning(
            input={"command": command, "description": "Run it"},
            title="Run it",
            metadata=metadata,
            time=RunningTime(start=STARTED + 3),
        ),
    )


async def _crash_mid_turn(database_url: str, workspace: Path) -> CrashedTurn:
    """A turn as the processor leaves it mid-stream and mid-tool, then the process dies."""
    session = new_session(directory=str(workspace))
    user = _user(session.id)
    user_text = TextPart(id=ids.ascending("prt"), session_id=session.id, message_id=user.id, text="Go")
    answer = _assistant(session.id, user.id, workspace)
    step = StepStartPart(id=ids.ascending("prt"), session_id=session.id, message_id=answer.id)
    text = TextPart(
        id=ids.ascending("prt"),
        session_id=session.id,
        message_id=answer.id,
        text="Let me run both.",
        time=SpanTime(start=STARTED + 2),
    )
    quiet = _running_bash(answer, "sleep 30", None)
    chatty = _running_bash(answer, "./download.sh", {"output": OUTPUT_PREVIEW, "description": "Run it"})
    store = await Store.open(database_url)
    try:
        await store.write(session_created(session))
        for event in (
            _message_event(user, DEFAULT_TENANT),
            _part_event(user_text, DEFAULT_TENANT),
            _message_event(answer, DEFAULT_TENANT),
            *(_part_event(part, DEFAULT_TENANT) for part in (step, text, quiet, chatty)),
        ):
            await store.write(event)
    finally:
        await store.close()  # no cleanup, no completion: what a killed process leaves behind
    return CrashedTurn(session, user, answer, step, text, quiet, chatty)


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return workspace


async def _get(live: LiveServer, path: str) -> Any:
    response = await live.client.get(path)
    assert response.status_code == 200, response.text
    return response.json()


async def test_restart_closes_the_turn_a_crash_left_running(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    crashed = await _crash_mid_turn(database_url, _workspace(tmp_path))
    sid = crashed.session.id

    async with start_live_server(tmp_path, fake_openai, database_url=database_url) as live:
        stored = await _get(live, f"/session/{sid}/message/{crashed.reply.id}")
        info = stored["info"]
        assert info["error"] == {
            "name": "MessageAbortedError",
            "data": {"message": INTERRUPTED_TURN_MESSAGE},
        }
        assert info["time"]["completed"] >= info["time"]["created"]
        parts = {part["id"]: part for part in stored["parts"]}
        assert parts[crashed.step.id] == crashed.step.wire()
        text = parts[crashed.text.id]
        assert text["text"] == "Let me run both."
        assert text["time"]["start"] == STARTED + 2 and text["time"]["end"] >= text["time"]["start"]
        for bash, kept_metadata in (
            (crashed.quiet_bash, {}),
            (crashed.chatty_bash, {"output": OUTPUT_PREVIEW, "description": "Run it"}),
        ):
            state = parts[bash.id]["state"]
            assert state["status"] == "error"
            assert state["error"] == ABORTED_MESSAGE
            assert state["input"] == bash.state.input
            assert state["metadata"] == {**kept_metadata, "interrupted": True}
            assert state["time"]["start"] == STARTED + 3
            assert state["time"]["end"] == info["time"]["completed"]
        assert await _get(live, "/session/status") == {}

        # The closing writes are durable events: a client resuming the session's stream sees them.
        events = EventCollector()
        await events.start(live.client, f"/event?sessionID={sid}&after=0")
        await events.wait_for(
            lambda f: f.type == "message.updated" and "error" in f.properties["info"], timeout=5
        )
        await events.stop()

        # The session works, and the model sees every interrupted call answered.
        live.fake.enqueue(reply("Back. The downloads were interrupted."))
        response = await live.prompt(sid, "Are you back?")
        assert response.status_code == 200, response.text
        assert [p["text"] for p in response.json()["parts"] if p["type"] == "text"] == [
            "Back. The downloads were interrupted."
        ]

    messages = fake_openai.requests[-1]["messages"]
    assistant = next(m for m in messages if m["role"] == "assistant")
    assert assistant["content"] == "Let me run both."
    assert [c["id"] for c in assistant["tool_calls"]] == [
        crashed.quiet_bash.call_id,
        crashed.chatty_bash.call_id,
    ]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    # No output yet: the error. Some output: history hands the model what the command had printed.
    assert results == {
        crashed.quiet_bash.call_id: ABORTED_MESSAGE,
        crashed.chatty_bash.call_id: OUTPUT_PREVIEW,
    }
    assert messages[-1] == {"role": "user", "content": "Are you back?"}


async def test_a_clean_restart_closes_nothing(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with start_live_server(tmp_path, fake_openai, database_url=database_url) as live:
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("bash", {"command": "echo hi", "description": "Say hi"}), reply("Said hi."))
        assert (await live.prompt(sid, "say hi")).status_code == 200
        before = await _get(live, f"/session/{sid}/message")
    seq_before = await _last_seq(database_url, sid)

    async with start_live_server(tmp_path, fake_openai, database_url=database_url) as live:
        after = await _get(live, f"/session/{sid}/message")

    assert after == before
    assert await _last_seq(database_url, sid) == seq_before


async def _last_seq(database_url: str, session_id: str) -> int:
    store = await Store.open(database_url)
    try:
        return await store.last_seq(DEFAULT_TENANT, session_id)
    finally:
        await store.close()


# --- Runtime.open directly: every tenant, pending calls, an error already there, counting --------------


def _settings(tmp_path: Path, fake: FakeOpenAI, database_url: str) -> Settings:
    return load_settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        database_owner_url=owner_url_for(database_url),  # recovery reads across tenants as the owner
        directory=_workspace(tmp_path),
        config_override=fake_provider_config(fake),
    )


async def test_runtime_open_closes_open_turns_of_every_tenant_once(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    crashed = await _crash_mid_turn(database_url, _workspace(tmp_path))
    tenant = "acme"
    session = new_session(directory=str(tmp_path))
    user = _user(session.id)
    failed = _assistant(session.id, user.id, tmp_path)
    failed.error = api_error("Provider is overloaded", status_code=529)
    thought = ReasoningPart(
        id=ids.ascending("prt"),
        session_id=session.id,
        message_id=failed.id,
        text="Hmm",
        time=SpanTime(start=STARTED + 2),
    )
    said = TextPart(
        id=ids.ascending("prt"),
        session_id=session.id,
        message_id=failed.id,
        text="Done already",
        time=SpanTime(start=STARTED + 2, end=STARTED + 3),
    )
    pending = ToolPart(
        id=ids.ascending("prt"),
        session_id=session.id,
        message_id=failed.id,
        call_id="call_pending",
        tool="read",
        state=ToolStatePending(),
    )
    store = await Store.open(database_url)
    try:
        await store.write(session_created(session, tenant))
        for event in (
            _message_event(user, tenant),
            _message_event(failed, tenant),
            *(_part_event(part, tenant) for part in (thought, said, pending)),
        ):
            await store.write(event)
    finally:
        await store.close()

    with caplog.at_level(logging.INFO, logger="agentforge.runtime.runtime"):
        rt = await Runtime.open(_settings(tmp_path, fake_openai, database_url))
    try:
        assert "Closed 2 turn(s)" in caplog.text
        assert await close_interrupted_turns(rt.sessions) == 0
        assert await rt.store.open_assistant_messages() == []

        ours = await rt.store.get_message(DEFAULT_TENANT, crashed.session.id, crashed.reply.id)
        theirs = await rt.store.get_message(tenant, session.id, failed.id)
    finally:
        await rt.close()

    assert ours is not None and isinstance(ours.info, AssistantMessage)
    assert ours.info.error is not None and ours.info.error.name == "MessageAbortedError"
    assert theirs is not None and isinstance(theirs.info, AssistantMessage)
    assert theirs.info.error == failed.error  # the real cause stays; recovery only completes it
    completed = theirs.info.time.completed
    assert completed is not None
    by_id = {part.id: part for part in theirs.parts}
    closed_thought = by_id[thought.id]
    assert isinstance(closed_thought, ReasoningPart) and closed_thought.time.end == completed
    assert by_id[said.id] == said
    interrupted = by_id[pending.id]
    assert isinstance(interrupted, ToolPart)
    assert interrupted.state.wire() == {
        "status": "error",
        "input": {},
        "error": ABORTED_MESSAGE,
        "metadata": {"interrupted": True},
        "time": {"start": completed, "end": completed},
    }


async def test_a_second_start_finds_nothing_left_open(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    await _crash_mid_turn(database_url, _workspace(tmp_path))
    settings = _settings(tmp_path, fake_openai, database_url)
    first = await Runtime.open(settings)
    await first.close()

    with caplog.at_level(logging.INFO, logger="agentforge.runtime.runtime"):
        second = await Runtime.open(settings)
    await second.close()

    assert "No turn was left running" in caplog.text


async def test_a_second_live_process_leaves_the_owners_turns_alone(
    tmp_path: Path, database_url: str, fake_openai: FakeOpenAI
) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    async with start_live_server(tmp_path / "one", fake_openai, database_url=database_url) as owner:
        session = await owner.create_session()
        gate = asyncio.Event()
        owner.fake.enqueue(Script().text("still streaming").pause(gate).finish("stop"))
        events = EventCollector()
        await events.start(owner.client, f"/event?sessionID={session['id']}")
        turn = asyncio.create_task(owner.prompt(session["id"], "talk"))
        await events.wait_for(lambda f: f.type == "message.part.delta")
        # A second process on the same database (like `agentforge run` in-process) must not
        # mistake the running turn for a crashed one. SQLite serves one server: a second refuses.
        if database_url.startswith("sqlite"):
            with pytest.raises(SecondServerError):  # what a second server's start-up runs
                await Runtime.open(owner.settings, stream=ScriptedModel([]), serving=True)
            beside = await Runtime.open(owner.settings, stream=ScriptedModel([]))
            await beside.close()
        else:
            async with start_live_server(tmp_path / "two", fake_openai, database_url=database_url):
                pass
        gate.set()
        reply = (await turn).json()
        await events.stop()
        assert "error" not in reply["info"]
        assert [p["text"] for p in reply["parts"] if p["type"] == "text"] == ["still streaming"]
        # The durable log holds every write either process made: none marked the turn aborted.
        logged = await owner.runtime.store.events_after(DEFAULT_TENANT, session["id"], 0)
        updates = [e for e in logged if e.type == MESSAGE_UPDATED]
        assert updates, "the log holds the turn's writes"
        assert [e for e in updates if "error" in e.properties["info"]] == []


async def test_restart_expires_permission_requests_a_crash_left_pending(
    tmp_path: Path, database_url: str, fake_openai: FakeOpenAI
) -> None:
    workspace = _workspace(tmp_path)
    crashed = await _crash_mid_turn(database_url, workspace)
    request = PermissionRequestInfo(
        id=ids.ascending("per"),
        session_id=crashed.session.id,
        permission="bash",
        patterns=["./download.sh"],
        always=["./download.sh *"],
        time=PermissionRequestTime(created=STARTED + 3, deadline=STARTED + 300_000),
    )
    store = await Store.open(database_url)
    try:
        asked = Event(
            type=PERMISSION_ASKED,
            properties=request.wire(),
            session_id=crashed.session.id,
            tenant_id=DEFAULT_TENANT,
        )
        await store.write(asked)
    finally:
        await store.close()

    async with start_live_server(tmp_path, fake_openai, database_url=database_url) as live:
        assert await _get(live, "/permission") == []
    store = await Store.open(database_url)
    try:
        stored = await store.permission_request(DEFAULT_TENANT, request.id)
    finally:
        await store.close()
    assert stored is not None
    assert (stored.status, stored.decision, stored.decided_by) == ("expired", "timeout", "restart")


async def test_runtime_open_kills_only_dead_instances_leftover_commands(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    """SQLite and Postgres alike: a dead instance's leftover command is killed at start-up, the
    running command of another live server sharing the data dir is left alone."""
    settings = _settings(tmp_path, fake_openai, database_url)
    directory = command_ledger(settings).directory
    neighbour = CommandLedger(directory, "feedface0001")  # a live server on the same data dir
    running = await start_group({TOKEN_VARIABLE: await neighbour.open_entry()})
    left = await start_group({TOKEN_VARIABLE: await dead_instance_entry(directory, "deadbeef0001")})
    try:
        runtime = await Runtime.open(settings)
        await runtime.close()

        assert await exited(left)
        assert running.returncode is None
    finally:
        for process in (running, left):
            if process.returncode is None:
                process.kill()
                await process.wait()
