"""Tool calls of a turn against a scripted model: permission asks, deadlines on a fake clock, aborts."""

from __future__ import annotations

import asyncio

from agentforge.model.message import AssistantMessage
from agentforge.model.part import ToolStateCompleted, ToolStateError
from agentforge.testing import Turn
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
