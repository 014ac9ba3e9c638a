"""`SessionPrompt.prompt_async` (session/prompt.py): the prompt is queued durably before it
returns, its turn is answered, and the entry leaves the queue only once the turn has ended.
In-process on SQLite with a scripted model."""

from __future__ import annotations

import asyncio

import pytest

from agentforge.model.message import AssistantMessage
from agentforge.session.events import MessageIdTakenError
from agentforge.session.inputs import PromptInput
from agentforge.testing.model import Turn
from tests.session.conftest import Forge, texts

EVER = 2**62  # queued before this (ms): every entry


async def test_prompt_async_is_queued_before_it_returns_and_dequeued_after_its_turn(forge: Forge) -> None:
    gate = asyncio.Event()
    forge.model.respond(Turn().text("first half, ").pause(gate).text("then the rest"))
    session = await forge.session()
    body = PromptInput.model_validate({"parts": [{"type": "text", "text": "hi"}]})
    await forge.prompts.prompt_async(session.id, body)

    queued = await forge.rt.store.queued_prompts(EVER)  # durable on return
    assert [sid for _, sid, _ in queued] == [session.id]

    await forge.until(lambda: bool(forge.events_of("message.part.delta")))
    assert await forge.rt.store.queued_prompts(EVER) == queued  # while its turn streams
    gate.set()
    await asyncio.gather(*forge.rt.background)
    assert await forge.rt.store.queued_prompts(EVER) == []
    history = await forge.history(session.id)
    reply = history[-1]
    assert isinstance(reply.info, AssistantMessage) and reply.info.parent_id == queued[0][2]
    assert texts(reply.parts) == ["first half, ", "then the rest"]


async def test_prompt_async_queues_only_a_message_it_writes_to_run(forge: Forge) -> None:
    """`noReply` writes the message and queues nothing; a `messageID` another session holds is
    refused whole, its queue entry with it."""
    forge.model.respond(Turn().text("done"))
    session, other = await forge.session(), await forge.session()
    quiet = PromptInput.model_validate({"parts": [{"type": "text", "text": "note"}], "noReply": True})
    await forge.prompts.prompt_async(session.id, quiet)
    assert await forge.rt.store.queued_prompts(EVER) == []

    answer = (await forge.prompt(other.id, "first")).info
    assert isinstance(answer, AssistantMessage)
    taken = answer.parent_id
    reused = PromptInput.model_validate({"parts": [{"type": "text", "text": "hi"}], "messageID": taken})
    with pytest.raises(MessageIdTakenError):
        await forge.prompts.prompt_async(session.id, reused)
    assert await forge.rt.store.queued_prompts(EVER) == []
    assert len(await forge.history(session.id)) == 1
