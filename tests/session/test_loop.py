"""The loop and the processor against a scripted model: steps, parts, tool calls, usage, new input."""

from __future__ import annotations

import asyncio
import re

import pytest

from agentforge.llm.messages import TextContent, ToolResultContent, UserModelMessage
from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.model.message import AssistantMessage, UserMessage, WithParts
from agentforge.model.part import (
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolStateCompleted,
    ToolStateError,
)
from agentforge.session import loop as loop_module
from agentforge.session.inputs import PromptInput
from agentforge.session.loop import StepAhead, TurnLoop
from agentforge.session.runner import RunHandle
from agentforge.testing import Turn
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import reply
from tests.session.conftest import Forge, MakeForge, texts


async def test_a_reply_is_stored_as_one_assistant_message_with_its_steps(forge: Forge) -> None:
    forge.model.respond(
        Turn().reasoning("thinking", metadata={"signature": "s1"}).text("Hello there", chunk_size=4)
    )
    session = await forge.session()
    reply = await forge.prompt(session.id, "hi")

    assert isinstance(reply.info, AssistantMessage)
    assert reply.info.finish == "stop" and reply.info.error is None
    kinds = [type(part) for part in reply.parts]
    assert kinds == [StepStartPart, ReasoningPart, TextPart, StepFinishPart]
    reasoning, text = reply.parts[1], reply.parts[2]
    assert isinstance(reasoning, ReasoningPart) and reasoning.metadata == {"signature": "s1"}
    assert isinstance(text, TextPart) and text.text == "Hello there"
    assert text.time is not None and text.time.end is not None
    history = await forge.history(session.id)
    assert [type(item.info) for item in history] == [UserMessage, AssistantMessage]
    assert history[1].parts == reply.parts  # what the store holds is what came back
    # The model saw the user's text and nothing else.
    (request,) = forge.model.requests
    assert [type(m) for m in request.messages] == [UserModelMessage]


async def test_a_tool_call_runs_and_its_result_goes_back_to_the_model(forge: Forge) -> None:
    (forge.workspace / "notes.txt").write_text("remember the milk\n")
    forge.model.respond(Turn().tool_call("read", {"filePath": "notes.txt"}), Turn().text("It says milk."))
    session = await forge.session()
    reply = await forge.prompt(session.id, "what do my notes say?")

    assert texts(reply.parts) == ["It says milk."]
    (call,) = await forge.tool_parts(session.id)
    assert isinstance(call.state, ToolStateCompleted)
    assert "remember the milk" in call.state.output
    assert call.state.title == "notes.txt"
    second = forge.model.requests[1]
    results = [
        c for m in second.messages for c in getattr(m, "content", []) if isinstance(c, ToolResultContent)
    ]
    assert len(results) == 1 and "remember the milk" in str(results[0])
    assert [tool.name for tool in second.tools][:2] == [tool.name for tool in forge.model.requests[0].tools][
        :2
    ]


async def test_calls_in_one_step_run_side_by_side_and_a_bad_one_fails_alone(forge: Forge) -> None:
    (forge.workspace / "a.txt").write_text("alpha\n")
    step = Turn().tool_call("read", {"filePath": "a.txt"}).tool_call("read", {"filePath": "missing.txt"})
    step.tool_call("Read", {"filePath": "a.txt"})  # a case-only mismatch is repaired
    step.tool_call("teleport", {"to": "mars"})  # an unknown tool goes to `invalid`
    forge.model.respond(step, Turn().text("done"))
    session = await forge.session()
    await forge.prompt(session.id, "read them")

    first, missing, repaired, unknown = await forge.tool_parts(session.id)
    assert isinstance(first.state, ToolStateCompleted) and "alpha" in first.state.output
    assert isinstance(missing.state, ToolStateError) and "File not found" in missing.state.error
    assert repaired.tool == "read" and isinstance(repaired.state, ToolStateCompleted)
    assert unknown.tool == "invalid" and isinstance(unknown.state, ToolStateCompleted)
    assert "unavailable tool 'teleport'" in unknown.state.output


async def test_usage_and_cost_are_counted_per_step(make_forge: MakeForge) -> None:
    cost = {"input": 1.0, "output": 2.0}  # USD per million tokens
    models = {"model": {"limit": {"context": 128_000, "output": 4096}, "cost": cost}}
    async with make_forge(provider={"scripted": {"models": models}}) as forge:
        forge.workspace.joinpath("a.txt").write_text("a\n")
        forge.model.respond(
            Turn().tool_call("read", {"filePath": "a.txt"}).usage(1000, 100),
            Turn().text("ok").usage(2000, 50, reasoning=10),
        )
        session = await forge.session()
        reply = await forge.prompt(session.id, "go")
        steps = [part for item in await forge.history(session.id) for part in item.parts]
    assert isinstance(reply.info, AssistantMessage)
    finishes = [part for part in steps if isinstance(part, StepFinishPart)]
    # Reasoning tokens are reported inside the output tokens and counted apart.
    assert [(f.tokens.input, f.tokens.output, f.tokens.reasoning) for f in finishes] == [
        (1000, 100, 0),
        (2000, 40, 10),
    ]
    assert finishes[0].cost == (1000 * 1.0 + 100 * 2.0) / 1_000_000
    assert reply.info.cost == finishes[1].cost  # one model call, one assistant message


async def test_a_reply_cut_at_the_output_limit_is_stored_as_an_error(forge: Forge) -> None:
    forge.model.respond(Turn().text("and then").finish("length"))
    session = await forge.session()
    reply = await forge.prompt(session.id, "tell me everything")
    assert isinstance(reply.info, AssistantMessage)
    assert reply.info.error is not None and reply.info.error.name == "MessageOutputLengthError"
    assert texts(reply.parts) == ["and then"]
    assert len(forge.events_of("session.error")) == 1


async def test_a_message_sent_while_the_loop_runs_is_answered_by_the_same_run(forge: Forge) -> None:
    gate = asyncio.Event()
    forge.model.respond(Turn().text("first answer").pause(gate), Turn().text("second answer"))
    # The second prompt joins the running loop: its message is noted on the run's handle.
    replies = await _second_prompt_while_the_first_is_paused(forge, gate, "first", "second")
    assert texts(replies[1].parts) == ["second answer"]
    assert len(forge.model.requests) == 2, "one loop, two model calls"
    last_request = forge.model.requests[1]
    users = [m for m in last_request.messages if isinstance(m, UserModelMessage)]
    assert len(users) == 2


async def test_a_history_read_ahead_is_not_used_once_a_message_was_noted_since(
    forge: Forge,
) -> None:
    # A prompt that starts a run reads the history right behind its own message (StepAhead). A
    # message noted on the run's handle after that read is not in it: the first step reads again,
    # so the model sees both messages (the message's id is older than the step's reply, so a later
    # read would take it as answered).
    forge.model.respond(Turn().text("both answered"))
    session = await forge.session()
    prompts = forge.prompts
    await prompts.create_user_message(session, _body("first"))
    ahead = StepAhead(history=forge.rt.store.history_after_writes("default", session.id))
    assert ahead.history is not None  # SQLite
    assert len(await asyncio.wait_for(asyncio.shield(ahead.history), 5)) == 1
    await prompts.create_user_message(session, _body("second"))
    handle = RunHandle()
    handle.note_input()  # as the runner registry notes a message for a running loop
    scope = await prompts.sessions.scope()
    loop = TurnLoop(prompts.services, scope, session, handle, prompter=prompts, ahead=ahead)

    reply = await asyncio.wait_for(loop.run(), 5)

    assert reply is not None and texts(reply.parts) == ["both answered"]
    (request,) = forge.model.requests
    assert len([m for m in request.messages if isinstance(m, UserModelMessage)]) == 2


async def test_a_history_read_ahead_of_the_run_is_its_first_steps(forge: Forge) -> None:
    forge.model.respond(Turn().text("answered"))
    session = await forge.session()
    prompts = forge.prompts
    await prompts.create_user_message(session, _body("first"))
    ahead = StepAhead(history=forge.rt.store.history_after_writes("default", session.id))
    scope = await prompts.sessions.scope()
    loop = TurnLoop(prompts.services, scope, session, RunHandle(), prompter=prompts, ahead=ahead)

    reply = await asyncio.wait_for(loop.run(), 5)

    assert reply is not None and texts(reply.parts) == ["answered"]
    assert ahead.history is None  # taken by the first step
    (request,) = forge.model.requests
    assert len([m for m in request.messages if isinstance(m, UserModelMessage)]) == 1


async def test_a_message_sent_during_a_tool_step_is_in_the_next_steps_request(forge: Forge) -> None:
    # The next step's history is read by the writer right behind the tool step's last write; a
    # message written before that is in it, and the model sees it with the tool's result.
    gate = asyncio.Event()
    (forge.workspace / "notes.txt").write_text("notes\n")
    forge.model.respond(
        Turn().tool_call("read", {"filePath": "notes.txt"}).pause(gate), Turn().text("both handled")
    )
    replies = await _second_prompt_while_the_first_is_paused(forge, gate, "read the notes", "and then this")

    assert texts(replies[1].parts) == ["both handled"]
    assert len(forge.model.requests) == 2
    users = [m for m in forge.model.requests[1].messages if isinstance(m, UserModelMessage)]
    assert len(users) == 2


async def test_two_prompts_to_an_idle_session_are_both_seen_by_the_model(forge: Forge) -> None:
    # The second message may be written before the first prompt's run starts (it is noted for that
    # run, whose first read waits for it), or after (noted on the run's handle: the history read
    # ahead of the run is not used), even after the first's reply was begun (an id older than the
    # reply's, written after its step read history: it is not what the reply answers). Either way
    # the model sees it before the run ends, as sent or, in a later step, inside a reminder. The
    # interleavings vary with the event-loop passes between the two prompts.
    for passes in range(24):
        forge.model.respond(Turn().text("ok"), Turn().text("ok"))
        session = await forge.session()
        asked = len(forge.model.requests)
        first = asyncio.create_task(forge.prompt(session.id, f"A{passes}"))
        for _ in range(passes % 6):
            await asyncio.sleep(0)
        second = asyncio.create_task(forge.prompt(session.id, f"B{passes}"))
        await asyncio.wait_for(asyncio.gather(first, second), 5)
        seen = [
            content.text
            for request in forge.model.requests[asked:]
            for message in request.messages
            if isinstance(message, UserModelMessage)
            for content in message.content
            if isinstance(content, TextContent)
        ]
        for sent in (f"A{passes}", f"B{passes}"):
            assert any(re.search(rf"^{sent}$", text, re.M) for text in seen), f"{sent}: the model saw {seen}"


async def test_a_message_older_than_the_reply_but_unanswered_is_answered_and_sent_last(forge: Forge) -> None:
    """A client-chosen id between the first message's and its reply's (as a prompt whose id was
    taken before the reply's but written after it): the reply does not answer it, so the model is
    asked again, with it as the last message (not the old reply: that would be a prefill)."""
    forge.model.respond(Turn().text("one done"), Turn().text("two done"))
    session = await forge.session()
    first_id, second_id = ids.ascending("msg"), ids.ascending("msg")
    await forge.prompt(session.id, "one", messageID=first_id)
    reply = await forge.prompt(session.id, "two", messageID=second_id)

    assert isinstance(reply.info, AssistantMessage) and reply.info.parent_id == second_id
    assert texts(reply.parts) == ["two done"]
    last = forge.model.requests[-1].messages[-1]
    assert isinstance(last, UserModelMessage)
    assert [c.text for c in last.content if isinstance(c, TextContent)] == ["two"]


async def test_each_step_reads_its_history_right_behind_the_writes_before_it(forge: Forge) -> None:
    # SQLite: the first step's history is read by the writer right behind the user message, the
    # next step's right behind the tool step's last write; a plain reply has no next step.
    (forge.workspace / "notes.txt").write_text("notes\n")
    forge.model.respond(Turn().tool_call("read", {"filePath": "notes.txt"}), Turn().text("read"))
    forge.model.respond(Turn().text("plain"))
    session = await forge.session()
    before = forge.rt.store.writer_reads

    await forge.prompt(session.id, "read the notes")
    after_tool_turn = forge.rt.store.writer_reads
    await forge.prompt(session.id, "thanks")

    assert after_tool_turn - before == 2
    assert forge.rt.store.writer_reads - after_tool_turn == 1


async def _second_prompt_while_the_first_is_paused(
    forge: Forge, gate: asyncio.Event, first_text: str, second_text: str
) -> list[WithParts]:
    """Both prompts' replies: the second sent once the first's model call is paused on `gate` and
    stored before `gate` opens."""
    session = await forge.session()
    first = asyncio.create_task(forge.prompt(session.id, first_text))
    await forge.until(lambda: len(forge.model.requests) == 1)
    second = asyncio.create_task(forge.prompt(session.id, second_text))
    await forge.until(
        lambda: (
            len([e for e in forge.events_of("message.updated") if e.properties["info"]["role"] == "user"])
            == 2
        )
    )
    gate.set()
    return list(await asyncio.wait_for(asyncio.gather(first, second), 5))


def _body(text: str) -> PromptInput:
    return PromptInput.model_validate({"parts": [{"type": "text", "text": text}]})


async def test_a_steps_message_commits_with_its_first_part(
    live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # However long the model takes here: the message waits for the part (a longer linger than any
    # machine's delay between them, so that the test does not depend on timing).
    store = live.runtime.store
    if store.dialect != "postgresql":
        pytest.skip("only the Postgres writer lingers (store/writer.py TaskWriter.lingers)")
    monkeypatch.setattr(loop_module, "STEP_LINGER", 60.0)
    published: list[tuple[Event, int]] = []  # each event, with the commits done when it was published
    live.runtime.bus.listen(lambda event: published.append((event, store.committed_batches)))
    live.fake.enqueue(reply("at once"))
    session = await live.create_session()

    answer = (await live.prompt(session["id"], "hi")).json()

    reply_id = answer["info"]["id"]
    message = next(n for e, n in published if e.type == "message.updated" and _message_id(e) == reply_id)
    part = next(n for e, n in published if e.type == "message.part.updated" and _message_id(e) == reply_id)
    assert message == part


def _message_id(event: Event) -> object:
    """The message a `message.updated` or `message.part.updated` event is about."""
    if "info" in event.properties:
        return event.properties["info"]["id"]
    return event.properties["part"]["messageID"]
