from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentforge.bus import Bus
from agentforge.session.channels.questions import QuestionService
from agentforge.tools.base import PermissionDeniedError, ToolError, ToolResult
from agentforge.tools.builtin.question import QuestionRejectedError, QuestionTool
from agentforge.tools.services import ToolServices
from tests.tools.harness import Harness

QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which database?",
        "header": "Database",
        "options": [
            {"label": "SQLite", "description": "one file"},
            {"label": "Postgres", "description": "a server"},
        ],
    },
    {
        "question": "Which features?",
        "header": "Features",
        "options": [{"label": "Auth", "description": "logins"}, {"label": "Audit", "description": "a trail"}],
        "multiple": True,
    },
]


@pytest.fixture
def service(harness: Harness) -> QuestionService:
    questions = QuestionService(Bus().publish)
    harness.services = ToolServices(questions=questions.for_tenant("default"))
    return questions


async def run_and_answer(
    harness: Harness, service: QuestionService, answer: Any, questions: list[dict[str, Any]] = QUESTIONS
) -> asyncio.Task[ToolResult]:
    task = asyncio.create_task(harness.run(QuestionTool(), questions=questions))
    for _ in range(100):
        await asyncio.sleep(0)
        if service.pending("default"):
            break
    [pending] = service.pending("default")
    assert pending["sessionID"] == harness.session_id
    assert pending["tool"]["callID"] == "call_1"
    answer(pending)
    return task


async def test_the_answers_come_back_to_the_model(harness: Harness, service: QuestionService) -> None:
    task = await run_and_answer(
        harness, service, lambda p: service.reply("default", p["id"], [["Postgres"], ["Auth", "Audit"]])
    )
    result = await task
    assert result.output == (
        'User has answered your questions: "Which database?"="Postgres", "Which features?"="Auth, Audit". '
        "You can now continue with the user's answers in mind."
    )
    assert result.title == "Asked 2 questions"
    assert result.metadata["answers"] == [["Postgres"], ["Auth", "Audit"]]


async def test_the_question_is_sent_as_given_without_empty_fields(
    harness: Harness, service: QuestionService
) -> None:
    seen: list[dict[str, Any]] = []

    def answer(pending: dict[str, Any]) -> None:
        seen.extend(pending["questions"])
        service.reply("default", pending["id"], [["SQLite"]])

    task = await run_and_answer(harness, service, answer, QUESTIONS[:1])
    result = await task
    assert seen == QUESTIONS[:1]
    assert result.title == "Asked 1 question"


async def test_missing_answers_read_unanswered(harness: Harness, service: QuestionService) -> None:
    task = await run_and_answer(harness, service, lambda p: service.reply("default", p["id"], [[]]))
    result = await task
    assert '"Which database?"="Unanswered", "Which features?"="Unanswered"' in result.output


async def test_a_dismissed_question_blocks_the_loop(harness: Harness, service: QuestionService) -> None:
    task = await run_and_answer(harness, service, lambda p: service.reject("default", p["id"]))
    with pytest.raises(QuestionRejectedError, match="The user dismissed this question") as rejected:
        await task
    assert isinstance(rejected.value, PermissionDeniedError) and rejected.value.blocks_loop


async def test_headers_longer_than_30_characters_are_refused(
    harness: Harness, service: QuestionService
) -> None:
    long_header = [{**QUESTIONS[0], "header": "x" * 31}]
    with pytest.raises(ToolError, match="invalid arguments"):
        await harness.run(QuestionTool(), questions=long_header)
    with pytest.raises(ToolError, match="invalid arguments"):
        await harness.run(QuestionTool(), questions=[])
    assert service.pending("default") == []


async def test_outside_a_session_the_tool_says_so(harness: Harness) -> None:
    with pytest.raises(ToolError, match="Questions cannot be asked here"):
        await harness.run(QuestionTool(), questions=QUESTIONS)
