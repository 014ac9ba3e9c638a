"""`agentforge session list|show`: read sessions and their conversations."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from agentforge.cli.connect import Target, connect, run_command
from agentforge.cli.options import ConfigPath, DatabaseUrl, DataDir, Json, Url
from agentforge.cli.render import print_conversation, sessions_table

session_app = typer.Typer(help="List and inspect sessions.", no_args_is_help=True)


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


@session_app.command("list")
def list_sessions(
    url: Url = None,
    as_json: Json = False,
    search: Annotated[str | None, typer.Option("--search", help="Only titles containing this.")] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many, newest first.")
    ] = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """List sessions, most recently updated first."""
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db)
    run_command(_list(target, as_json=as_json, search=search, limit=limit))


async def _list(target: Target, *, as_json: bool, search: str | None, limit: int | None) -> int:
    async with connect(target) as client:
        sessions = await client.list_sessions(search=search, limit=limit)
    if as_json:
        _print_json([session.wire() for session in sessions])
    elif sessions:
        Console(highlight=False).print(sessions_table(sessions))
    else:
        typer.echo("no sessions")
    return 0


@session_app.command("show")
def show_session(
    session_id: Annotated[str, typer.Argument(help="The session's id (ses_...).")],
    url: Url = None,
    as_json: Json = False,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Show a session's messages and their parts."""
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db)
    run_command(_show(target, session_id, as_json=as_json))


async def _show(target: Target, session_id: str, *, as_json: bool) -> int:
    async with connect(target) as client:
        session = await client.get_session(session_id)
        messages = (await client.messages(session_id)).items
    if as_json:
        _print_json({"session": session.wire(), "messages": [message.wire() for message in messages]})
    else:
        print_conversation(Console(highlight=False), session, messages)
    return 0
