"""`agentforge permission list|reply`: answer a server's permission requests from another terminal."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from agentforge.cli import exits
from agentforge.cli.connect import Target, connect, run_command
from agentforge.cli.options import DEFAULT_SERVER_URL, HELP_MARKUP, Json, ServerUrl
from agentforge.cli.render import format_time
from agentforge.cli.visible import visible

permission_app = typer.Typer(
    help="List and answer permission requests waiting on a server.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)


class Reply(StrEnum):
    once = "once"
    always = "always"
    reject = "reject"


@permission_app.command("list")
def list_permissions(url: ServerUrl = DEFAULT_SERVER_URL, as_json: Json = False) -> None:
    """The permission requests waiting for an answer, oldest first."""
    run_command(_list(Target(url=url), as_json=as_json))


async def _list(target: Target, *, as_json: bool) -> int:
    async with connect(target) as client:
        requests = await client.permissions.list()
    if as_json:
        typer.echo(json.dumps([request.wire() for request in requests], indent=2, ensure_ascii=False))
        return exits.OK
    if not requests:
        typer.echo("no permission requests waiting")
        return exits.OK
    console = Console(highlight=False, soft_wrap=True)
    for request in requests:
        line = Text(visible(request.id), style="bold").append(f"  {visible(request.permission)}  ")
        console.print(line.append(", ".join(visible(pattern) for pattern in request.patterns)))
        details = f"    session {visible(request.session_id)} · deadline {format_time(request.time.deadline)}"
        if request.always:
            details += f" · always would allow {', '.join(visible(p) for p in request.always)}"
        console.print(Text(details, style="dim"))
    return exits.OK


@permission_app.command("reply")
def reply_permission(
    request_id: Annotated[str, typer.Argument(help="The request's id (per_...).")],
    reply: Annotated[Reply, typer.Argument(help="once, always (for the session) or reject.")],
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="With reject: tell the model why.")
    ] = None,
    url: ServerUrl = DEFAULT_SERVER_URL,
) -> None:
    """Answer a permission request."""
    if message is not None and reply is not Reply.reject:
        raise typer.BadParameter("a message goes with reject", param_hint="--message")
    run_command(_reply(Target(url=url), request_id, reply, message))


async def _reply(target: Target, request_id: str, reply: Reply, message: str | None) -> int:
    async with connect(target) as client:
        await client.permissions.reply(request_id, reply.value, message)
    typer.echo(f"{request_id}: {reply.value}")
    return exits.OK
