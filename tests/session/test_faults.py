"""Provider faults against a scripted model and a fake clock: retry back-off costs no wall time."""

from __future__ import annotations

import asyncio

from agentforge.llm.retry import RETRY_INITIAL_DELAY
from agentforge.model.message import AssistantMessage
from agentforge.model.part import CompactionPart
from agentforge.testing import FakeClock, Turn
from tests.session.conftest import Forge, MakeForge, texts


async def test_a_retryable_fault_waits_the_backoff_on_the_clock_and_retries_into_the_same_message(
    make_forge: MakeForge,
) -> None:
    async with make_forge() as forge:
        forge.model.respond(Turn().text("before the fault").fail("rate_limit"), Turn().text("recovered"))
        session = await forge.session()
        start = forge.clock.time()
        prompt = asyncio.create_task(forge.prompt(session.id, "hello"))
        await asyncio.wait_for(forge.clock.sleeping(), 5)
        assert len(forge.model.requests) == 1  # waiting out the back-off, not retrying yet
        forge.clock.advance(forge.clock.slept[0])
        reply = await asyncio.wait_for(prompt, 5)
        history = await forge.history(session.id)

    assert isinstance(reply.info, AssistantMessage) and reply.info.error is None
    assert texts(reply.parts) == ["recovered"]  # the failed attempt's text is removed
    (waited,) = forge.clock.slept
    assert abs(waited * 1000 - RETRY_INITIAL_DELAY) <= RETRY_INITIAL_DELAY * 0.1  # 2 s ± 10 % jitter
    (retry,) = [e for e in forge.events_of("session.status") if e.properties["status"]["type"] == "retry"]
    status = retry.properties["status"]
    assert status["attempt"] == 1 and status["message"] == "Rate limit reached, slow down"
    assert status["next"] == int(start * 1000) + round(waited * 1000)
    assert len([item for item in history if isinstance(item.info, AssistantMessage)]) == 1


async def test_back_off_doubles_until_the_attempts_run_out_then_the_error_is_stored(
    make_forge: MakeForge,
) -> None:
    async with make_forge(clock=FakeClock(autojump=True), retry={"max_attempts": 3}) as forge:
        forge.model.respond(*[Turn().fail("overloaded") for _ in range(4)])
        session = await forge.session()
        reply = await forge.prompt(session.id, "hello")
    assert len(forge.clock.slept) == 3
    for waited, expected in zip(forge.clock.slept, (2, 4, 8), strict=True):
        assert abs(waited - expected) <= expected * 0.1  # doubling, ± 10 % jitter
    assert isinstance(reply.info, AssistantMessage) and reply.info.error is not None
    assert reply.info.error.name == "APIError"
    assert len(forge.model.requests) == 4


async def test_a_fault_that_is_not_retryable_is_stored_at_once(forge: Forge) -> None:
    # The forge's clock stands still: a back-off would hang this test.
    forge.model.respond(Turn().text("partial").fail("invalid_request", "Unsupported parameter: top_k"))
    session = await forge.session()
    reply = await forge.prompt(session.id, "hello")
    assert forge.clock.slept == []
    assert isinstance(reply.info, AssistantMessage) and reply.info.error is not None
    assert "Unsupported parameter: top_k" in str(reply.info.error.wire())
    assert texts(reply.parts) == ["partial"]


async def test_a_context_overflow_compacts_the_session_and_goes_on(forge: Forge) -> None:
    forge.model.respond(
        Turn().fail("context_overflow"),  # the turn's request is too long
        Turn().text("Summary: the user said hello."),  # the compaction agent's summary
        Turn().text("Hello again."),  # the replayed request, after the summary
    )
    session = await forge.session()
    reply = await forge.prompt(session.id, "hello")
    assert texts(reply.parts) == ["Hello again."]
    history = await forge.history(session.id)
    compactions = [p for item in history for p in item.parts if isinstance(p, CompactionPart)]
    assert len(compactions) == 1 and compactions[0].overflow
    summaries = [
        item.info for item in history if isinstance(item.info, AssistantMessage) and item.info.summary
    ]
    assert len(summaries) == 1
    assert forge.clock.slept == []


async def test_abort_during_a_long_back_off_ends_the_turn_without_waiting(make_forge: MakeForge) -> None:
    async with make_forge() as forge:  # time stands still: the back-off never ends by itself
        clock = forge.clock
        forge.model.respond(Turn().fail("server_error"))
        session = await forge.session()
        prompt = asyncio.create_task(forge.prompt(session.id, "hello"))
        await asyncio.wait_for(clock.sleeping(), 5)
        assert await forge.sessions.abort(session.id)
        reply = await asyncio.wait_for(prompt, 5)
    assert isinstance(reply.info, AssistantMessage) and reply.info.error is not None
    assert reply.info.error.name == "MessageAbortedError"
    assert clock.sleepers == 0  # the abandoned sleep is forgotten
    assert len(forge.model.requests) == 1
