"""`agentforge question list|reply|reject`: answer a server's pending questions from another terminal."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from agentforge.cli import exits
from agentforge.cli.connect import Target, connect, run_command
from agentforge.cli.humans import parse_answer, question_lines
from agentforge.cli.options import DEFAULT_SERVER_URL, HELP_MARKUP, Json, ServerUrl
from agentforge.cli.visible import visible
from agentforge.client import AgentForgeError, AsyncAgentForge

question_app = typer.Typer(
    help="List, answer and dismiss questions waiting on a server.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)


@question_app.command("list")
def list_questions(url: ServerUrl = DEFAULT_SERVER_URL, as_json: Json = False) -> None:
    """The questions waiting for an answer, oldest first."""
    run_command(_list(Target(url=url), as_json=as_json))


async def _list(target: Target, *, as_json: bool) -> int:
    async with connect(target) as client:
        pending = [q.model_dump(mode="json", by_alias=True) for q in await client.questions.list()]
    if as_json:
        typer.echo(json.dumps(pending, indent=2, ensure_ascii=False))
        return exits.OK
    if not pending:
        typer.echo("no questions waiting")
        return exits.OK
    console = Console(highlight=False)
    for request in pending:
        head = visible(f"{request.get('id')} (session {request.get('sessionID')})")
        console.print(head, style="bold", markup=False)
        for line in question_lines(request.get("questions") or []):
            console.print(line)
    return exits.OK


@question_app.command("reply")
def reply_question(
    request_id: Annotated[str, typer.Argument(help="The question's id (que_...).")],
    answers: Annotated[
        list[str],
        typer.Argument(
            help='One answer per question asked: an option\'s number ("1,3" when several may be'
            " chosen) or your own words."
        ),
    ],
    url: ServerUrl = DEFAULT_SERVER_URL,
) -> None:
    """Answer a question."""
    run_command(_reply(Target(url=url), request_id, answers))


async def _reply(target: Target, request_id: str, answers: list[str]) -> int:
    async with connect(target) as client:
        questions = await _questions_of(client, request_id)
        if len(answers) != len(questions):
            typer.echo(
                f"error: {request_id} asks {len(questions)} question(s), got {len(answers)} answer(s)",
                err=True,
            )
            return exits.USAGE
        chosen = [parse_answer(question, answer) for question, answer in zip(questions, answers, strict=True)]
        await client.questions.reply(request_id, chosen)
    typer.echo(f"{request_id}: answered {chosen}")
    return exits.OK


async def _questions_of(client: AsyncAgentForge, request_id: str) -> list[dict[str, Any]]:
    for request in await client.questions.list():
        if request.id == request_id:
            return [question.model_dump(mode="json", by_alias=True) for question in request.questions]
    raise AgentForgeError(404, "NotFoundError", f"Question request not found: {request_id}")


@question_app.command("reject")
def reject_question(
    request_id: Annotated[str, typer.Argument(help="The question's id (que_...).")],
    url: ServerUrl = DEFAULT_SERVER_URL,
) -> None:
    """Dismiss a question (the turn stops)."""
    run_command(_reject(Target(url=url), request_id))


async def _reject(target: Target, request_id: str) -> int:
    async with connect(target) as client:
        await client.questions.reject(request_id)
    typer.echo(f"{request_id}: dismissed")
    return exits.OK
