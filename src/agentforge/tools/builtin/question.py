"""The `question` tool (KERNEL 7.7): ask the user questions and wait for the answers.

The tool reaches the people through `ctx.services.questions`, a service the session layer lends it
(bound to the caller's tenant; `agentforge.session.channels.questions`): it publishes `question.asked` and
waits for `POST /question/{id}/reply` or `/reject`.
"""

from __future__ import annotations

from pydantic import Field

from agentforge.tools.base import PermissionDeniedError, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.params import ToolParams
from agentforge.tools.services import QuestionAsker

MAX_HEADER_LENGTH = 30
DISMISSED = "The user dismissed this question"

DESCRIPTION = """Use this tool when you need to ask the user questions during execution. This \
allows you to:
1. Gather user preferences or requirements
2. Clarify ambiguous instructions
3. Get decisions on implementation choices as you work
4. Offer choices to the user about what direction to take.

Usage notes:
- Each question has a short header (at most 30 characters) and a list of options, each with a \
concise label (1-5 words) and a description of what choosing it means.
- When `custom` is enabled (the default), the user can also type their own answer: do not add an \
"Other" option yourself.
- Set `multiple: true` to let the user select more than one option.
- If you recommend a specific option, make it the first one and add "(Recommended)" to its label.
- Answers come back as the labels the user picked (or the text they typed), one list per question."""


class QuestionOption(ToolParams):
    label: str = Field(description="Display text (1-5 words, concise)")
    description: str = Field(description="Explanation of the choice")


class QuestionInfo(ToolParams):
    question: str = Field(description="Complete question")
    header: str = Field(max_length=MAX_HEADER_LENGTH, description="Very short label (max 30 chars)")
    options: list[QuestionOption] = Field(description="Available choices")
    multiple: bool | None = Field(default=None, description="Allow selecting multiple choices")
    custom: bool | None = Field(default=None, description="Allow typing a custom answer (default true)")


class QuestionParams(ToolParams):
    questions: list[QuestionInfo] = Field(min_length=1, description="Questions to ask")


class QuestionRejectedError(PermissionDeniedError):
    """The user dismissed the question: like a rejected permission, the loop stops after this step."""

    def __init__(self, message: str = DISMISSED) -> None:
        super().__init__(message)


class QuestionExpiredError(ToolError):
    """Nobody answered before the deadline: the model hears so and goes on without the answers."""

    def __init__(self, timeout_seconds: float) -> None:
        super().__init__(
            f"Nobody answered this question within {timeout_seconds:g} seconds. Do not ask it again; "
            "continue with your best judgement and say which assumption you made."
        )


def question_asker(ctx: ToolContext) -> QuestionAsker:
    found = ctx.services.questions
    if found is None:
        raise ToolError("Questions cannot be asked here (this tool runs only inside a session).")
    return found


def format_answers(questions: list[QuestionInfo], answers: list[list[str]]) -> str:
    pairs = []
    for index, info in enumerate(questions):
        chosen = answers[index] if index < len(answers) else []
        pairs.append(f'"{info.question}"="{", ".join(chosen) if chosen else "Unanswered"}"')
    return (
        f"User has answered your questions: {', '.join(pairs)}. "
        "You can now continue with the user's answers in mind."
    )


class QuestionTool(Tool[QuestionParams]):
    id = "question"
    changes_files = False  # it asks a person: no file changes
    description = DESCRIPTION
    parameters = QuestionParams

    async def execute(self, args: QuestionParams, ctx: ToolContext) -> ToolResult:
        asker = question_asker(ctx)
        wire = [info.model_dump(mode="json", exclude_none=True) for info in args.questions]
        answers = await asker.ask(ctx.session_id, wire, message_id=ctx.message_id, call_id=ctx.call_id)
        count = len(args.questions)
        return ToolResult(
            title=f"Asked {count} question{'s' if count != 1 else ''}",
            output=format_answers(args.questions, answers),
            metadata={"answers": answers},
        )
