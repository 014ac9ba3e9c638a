from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentforge.bus import Bus
from agentforge.config import Config, ConfigError
from agentforge.model.events import Event
from agentforge.session.channels.questions import QuestionService
from agentforge.testing import FakeClock
from agentforge.tools.base import PermissionDeniedError
from agentforge.tools.builtin.question import DISMISSED, QuestionExpiredError, QuestionRejectedError

QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which database?",
        "header": "Database",
        "options": [
            {"label": "SQLite", "description": "one file"},
            {"label": "Postgres", "description": "a server"},
        ],
    }
]


class Recorder:
    def __init__(self) -> None:
        self.bus = Bus()
        self.events: list[Event] = []
        self.bus.listen(self.events.append)

    def of_type(self, kind: str) -> list[Event]:
        return [event for event in self.events if event.type == kind]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def service(recorder: Recorder) -> QuestionService:
    return QuestionService(recorder.bus.publish)


async def ask_in_background(
    service: QuestionService, *, tenant: str = "t1", session: str = "ses_1", call: str = "call_1"
) -> tuple[asyncio.Task[list[list[str]]], str]:
    task = asyncio.create_task(service.ask(tenant, session, QUESTIONS, message_id="msg_1", call_id=call))
    for _ in range(100):
        await asyncio.sleep(0)
        mine = [q for q in service.pending(tenant) if q["tool"]["callID"] == call]
        if mine:
            return task, mine[0]["id"]
    raise AssertionError("the question was never asked")


async def test_ask_publishes_the_question_and_reply_answers_it(
    service: QuestionService, recorder: Recorder
) -> None:
    task, request_id = await ask_in_background(service)
    [asked] = recorder.of_type("question.asked")
    assert asked.properties == {
        "id": request_id,
        "sessionID": "ses_1",
        "questions": QUESTIONS,
        "tool": {"messageID": "msg_1", "callID": "call_1"},
    }
    assert request_id.startswith("que_")
    assert (asked.session_id, asked.tenant_id) == ("ses_1", "t1")
    assert service.pending("t1") == [asked.properties]

    assert service.reply("t1", request_id, [["Postgres"]]) is True
    assert await task == [["Postgres"]]
    [replied] = recorder.of_type("question.replied")
    assert replied.properties == {"sessionID": "ses_1", "requestID": request_id, "answers": [["Postgres"]]}
    assert service.pending("t1") == []
    assert recorder.of_type("question.rejected") == []


async def test_reject_fails_the_ask_with_an_error_that_blocks_the_loop(
    service: QuestionService, recorder: Recorder
) -> None:
    task, request_id = await ask_in_background(service)
    assert service.reject("t1", request_id) is True
    with pytest.raises(QuestionRejectedError) as rejected:
        await task
    assert isinstance(rejected.value, PermissionDeniedError) and rejected.value.blocks_loop
    assert str(rejected.value) == DISMISSED
    [event] = recorder.of_type("question.rejected")
    assert event.properties == {"sessionID": "ses_1", "requestID": request_id}
    assert service.pending("t1") == []


async def test_unknown_answered_or_foreign_requests_are_not_found(service: QuestionService) -> None:
    task, request_id = await ask_in_background(service)
    assert service.reply("t1", "que_nope", [["x"]]) is False
    assert service.reject("t1", "que_nope") is False
    # Another tenant can neither see nor answer it.
    assert service.pending("t2") == []
    assert service.reply("t2", request_id, [["SQLite"]]) is False
    assert service.reject("t2", request_id) is False
    assert service.reply("t1", request_id, [["SQLite"]]) is True
    assert await task == [["SQLite"]]
    assert service.reply("t1", request_id, [["again"]]) is False
    assert service.reject("t1", request_id) is False


async def test_a_cancelled_ask_withdraws_its_question(service: QuestionService, recorder: Recorder) -> None:
    task, request_id = await ask_in_background(service)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert service.pending("t1") == []
    [event] = recorder.of_type("question.rejected")
    assert event.properties == {"sessionID": "ses_1", "requestID": request_id}
    assert service.reply("t1", request_id, [["late"]]) is False


async def test_reject_session_dismisses_only_that_sessions_questions(service: QuestionService) -> None:
    first, _ = await ask_in_background(service, session="ses_a", call="call_a1")
    second, _ = await ask_in_background(service, session="ses_a", call="call_a2")
    other, other_id = await ask_in_background(service, session="ses_b", call="call_b")
    assert service.reject_session("t1", "ses_a") == 2
    for task in (first, second):
        with pytest.raises(QuestionRejectedError):
            await task
    assert [q["id"] for q in service.pending("t1")] == [other_id]
    assert service.reject_session("t1", "ses_a") == 0
    service.reply("t1", other_id, [["SQLite"]])
    assert await other == [["SQLite"]]


async def test_pending_lists_oldest_first_per_tenant(service: QuestionService) -> None:
    tasks = []
    for index in range(3):
        task, _ = await ask_in_background(service, call=f"call_{index}")
        tasks.append(task)
    foreign, _ = await ask_in_background(service, tenant="t2", call="call_x")
    assert [q["tool"]["callID"] for q in service.pending("t1")] == ["call_0", "call_1", "call_2"]
    assert [q["tool"]["callID"] for q in service.pending("t2")] == ["call_x"]
    for task in [*tasks, foreign]:
        task.cancel()
    await asyncio.gather(*tasks, foreign, return_exceptions=True)


async def test_the_tenant_binding_asks_for_its_tenant(service: QuestionService) -> None:
    bound = service.for_tenant("t9")
    task = asyncio.create_task(bound.ask("ses_9", QUESTIONS, message_id="msg_9", call_id="call_9"))
    for _ in range(100):
        await asyncio.sleep(0)
        if service.pending("t9"):
            break
    [pending] = service.pending("t9")
    assert service.reply("t9", pending["id"], [["SQLite"]])
    assert await task == [["SQLite"]]


async def test_nobody_answering_before_the_deadline_tells_the_model_so(recorder: Recorder) -> None:
    clock = FakeClock()
    service = QuestionService(recorder.bus.publish, timeout_seconds=60, clock=clock)
    task, request_id = await ask_in_background(service)
    await clock.sleeping()
    clock.advance(59)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(1)
    with pytest.raises(QuestionExpiredError) as expired:
        await task
    # The model reads the message and goes on: not a refusal that stops the loop.
    assert not isinstance(expired.value, PermissionDeniedError)
    assert "Nobody answered this question within 60 seconds" in str(expired.value)
    [event] = recorder.of_type("question.rejected")
    assert event.properties == {"sessionID": "ses_1", "requestID": request_id, "reason": "timeout"}
    assert service.pending("t1") == []


async def test_an_answer_in_time_cancels_the_deadline(recorder: Recorder) -> None:
    clock = FakeClock()
    service = QuestionService(recorder.bus.publish, timeout_seconds=60, clock=clock)
    task, request_id = await ask_in_background(service)
    await clock.sleeping()
    assert service.reply("t1", request_id, [["SQLite"]]) is True
    assert await task == [["SQLite"]]
    await asyncio.sleep(0)
    assert clock.sleepers == 0
    assert recorder.of_type("question.rejected") == []


def test_question_timeout_comes_from_the_config() -> None:
    publish = Bus().publish
    assert QuestionService.from_config(publish, Config()).timeout_seconds == 300
    assert (
        QuestionService.from_config(publish, Config.model_validate({"question_timeout": 5})).timeout_seconds
        == 5
    )
    with pytest.raises(ConfigError, match="question_timeout"):
        QuestionService.from_config(publish, Config.model_validate({"question_timeout": "soon"}))
