"""Tool calls of a turn against a scripted model: permission asks, deadlines on a fake clock, aborts."""

from __future__ import annotations

import asyncio

import pytest

from agentforge.model.events import PART_UPDATED, Event
from agentforge.model.message import AssistantMessage
from agentforge.model.part import ToolStateCompleted, ToolStateError
from agentforge.session import tool_calls as tool_calls_module
from agentforge.testing import Turn
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import Script, reply
from tests.session.conftest import Forge, MakeForge, texts


async def test_an_ask_holds_the_call_until_a_person_answers(make_forge: MakeForge) -> None:
    async with make_forge(permission={"read": "ask"}) as forge:
        (forge.workspace / "a.txt").write_text("alpha\n")
        forge.model.respond(Turn().tool_call("read", {"filePath": "a.txt"}), Turn().text("read it"))
        session = await forge.session()
        prompt = asyncio.create_task(forge.prompt(session.id, "read a.txt"))
        await forge.until(lambda: bool(forge.rt.permissions.pending("default")))
        (request,) = forge.rt.permissions.pending("default")
        assert (request.permission, request.patterns) == ("read", [str(forge.workspace / "a.txt")])
        assert request.tool is not None
        await forge.rt.permissions.reply("default", request.id, "once")
        reply = await asyncio.wait_for(prompt, 5)
        (call,) = await forge.tool_parts(session.id)
    assert texts(reply.parts) == ["read it"]
    assert isinstance(call.state, ToolStateCompleted) and request.tool.call_id == call.call_id


async def test_an_unanswered_ask_expires_at_its_deadline_without_waiting_for_it(
    make_forge: MakeForge,
) -> None:
    async with make_forge(permission={"read": "ask"}, permission_timeout=300) as forge:
        clock = forge.clock
        (forge.workspace / "a.txt").write_text("alpha\n")
        forge.model.respond(Turn().tool_call("read", {"filePath": "a.txt"}))
        session = await forge.session()
        prompt = asyncio.create_task(forge.prompt(session.id, "read a.txt"))
        await asyncio.wait_for(clock.sleeping(), 5)  # the deadline is set
        (request,) = forge.rt.permissions.pending("default")
        assert request.time.deadline - request.time.created == 300_000
        clock.advance(299)
        assert forge.rt.permissions.pending("default") == [request]  # not yet
        clock.advance(1)
        reply = await asyncio.wait_for(prompt, 5)
        (call,) = await forge.tool_parts(session.id)
    # The default (deny) applied: the call failed and the turn stopped there.
    assert isinstance(call.state, ToolStateError) and "300" in call.state.error
    assert isinstance(reply.info, AssistantMessage) and reply.info.finish == "tool-calls"
    assert len(forge.model.requests) == 1
    replied = forge.events_of("permission.replied")
    assert [(e.properties["status"], e.properties["decidedBy"]) for e in replied] == [("expired", "deadline")]


async def test_three_identical_calls_in_a_row_ask_about_a_loop(make_forge: MakeForge) -> None:
    async with make_forge() as forge:
        (forge.workspace / "a.txt").write_text("alpha\n")
        same = {"filePath": "a.txt"}
        forge.model.respond(*[Turn().tool_call("read", same) for _ in range(3)], Turn().text("stuck"))
        session = await forge.session()
        prompt = asyncio.create_task(forge.prompt(session.id, "read it again and again"))
        await forge.until(lambda: bool(forge.rt.permissions.pending("default")))
        (request,) = forge.rt.permissions.pending("default")
        assert (request.permission, request.patterns) == ("doom_loop", ["read"])
        await forge.rt.permissions.reply("default", request.id, "reject")
        await asyncio.wait_for(prompt, 5)
        calls = await forge.tool_parts(session.id)
    assert [type(call.state) for call in calls] == [ToolStateCompleted, ToolStateCompleted, ToolStateError]
    assert len(forge.model.requests) == 3, "a rejection stops the turn"


async def test_abort_interrupts_a_waiting_call_and_withdraws_its_question(forge: Forge) -> None:
    question = {"question": "Which one?", "header": "Pick", "options": [{"label": "A", "description": "a"}]}
    forge.model.respond(Turn().tool_call("question", {"questions": [question]}))
    session = await forge.session()
    prompt = asyncio.create_task(forge.prompt(session.id, "ask me"))
    await forge.until(lambda: bool(forge.rt.questions.pending("default")))
    assert await forge.sessions.abort(session.id)
    reply = await asyncio.wait_for(prompt, 5)
    (call,) = await forge.tool_parts(session.id)
    assert isinstance(call.state, ToolStateError)
    assert call.state.metadata == {"interrupted": True}
    assert isinstance(reply.info, AssistantMessage) and reply.info.error is not None
    assert forge.rt.questions.pending("default") == []
    assert len(forge.events_of("question.rejected")) == 1


async def test_a_todo_list_written_by_the_model_is_the_sessions(forge: Forge) -> None:
    todos = [{"content": "write tests", "status": "in_progress", "priority": "high"}]
    forge.model.respond(Turn().tool_call("todowrite", {"todos": todos}), Turn().text("noted"))
    session = await forge.session()
    await forge.prompt(session.id, "plan it")
    assert await forge.rt.store.todos("default", session.id) == todos


async def test_a_quick_reads_start_and_result_commit_with_its_steps_end(
    live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the writer lingers (Postgres): a call without effects runs while its start is written,
    and its start (once its input has streamed), its result and its step's end commit in one
    transaction. A call with effects never waits for company to start: its start commits before it
    runs (lingering this long, the turn would not end)."""
    store = live.runtime.store
    if store.dialect != "postgresql":
        pytest.skip("only the Postgres writer lingers (store/writer.py TaskWriter.lingers)")
    monkeypatch.setattr(tool_calls_module, "CALL_LINGER", 60.0)
    published: list[tuple[Event, int]] = []  # each event, with the commits done when it was published
    named = {"read": asyncio.Event(), "bash": asyncio.Event()}  # a call's part is stored, pending

    def note(event: Event) -> None:
        published.append((event, store.committed_batches))
        if event.type == PART_UPDATED and event.properties["part"].get("tool") in named:
            named[event.properties["part"]["tool"]].set()

    live.runtime.bus.listen(note)
    (live.workspace / "a.txt").write_text("alpha\n")
    streamed = {"read": asyncio.Event(), "bash": asyncio.Event()}  # the call's input has streamed
    live.fake.enqueue(
        Script().tool_call("read", {"filePath": "a.txt"}).pause(streamed["read"]).finish("tool_calls"),
        Script()
        .tool_call("bash", {"command": "echo hi", "description": "Say hi"})
        .pause(streamed["bash"])
        .finish("tool_calls"),
        reply("done"),
    )
    session = await live.create_session()
    prompt = asyncio.create_task(live.prompt(session["id"], "read, then run"))
    for tool in ("read", "bash"):
        await asyncio.wait_for(named[tool].wait(), 30)
        streamed[tool].set()
    answer = await asyncio.wait_for(prompt, 30)

    assert answer.status_code == 200, answer.text
    read, bash = _commits_by_state(published, "read"), _commits_by_state(published, "bash")
    step_ends = [n for e, n in published if e.type == PART_UPDATED and _type(e) == "step-finish"]
    assert read["pending"] < read["running"] == read["completed"] == step_ends[0], (read, step_ends)
    assert bash["pending"] < bash["running"] < bash["completed"], bash


def _type(event: Event) -> object:
    return event.properties["part"]["type"]


def _commits_by_state(published: list[tuple[Event, int]], tool: str) -> dict[str, int]:
    """The commits done when each state of the `tool` call's part was published."""
    return {
        e.properties["part"]["state"]["status"]: n
        for e, n in published
        if e.type == PART_UPDATED and e.properties["part"].get("tool") == tool
    }
