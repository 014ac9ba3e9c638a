"""`agentforge session list|show|delete|rename|export|fork`: sessions and their conversations."""

from __future__ import annotations

import asyncio
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agentforge.cli import exits
from agentforge.cli.connect import Target, connect, run_command
from agentforge.cli.export import as_json as export_json
from agentforge.cli.export import as_markdown
from agentforge.cli.options import HELP_MARKUP, ConfigPath, DatabaseUrl, DataDir, Json, Url
from agentforge.cli.render import print_conversation, sessions_table

session_app = typer.Typer(
    help="List, inspect, export, copy and remove sessions.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)


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


SessionId = Annotated[str, typer.Argument(help="The session's id (ses_...).")]


@session_app.command("delete")
def delete_session(
    session_id: SessionId,
    url: Url = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Delete a session, its messages and its child sessions."""
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db)
    run_command(_delete(target, session_id))


async def _delete(target: Target, session_id: str) -> int:
    async with connect(target) as client:
        await client.delete_session(session_id)
    typer.echo(f"deleted {session_id}")
    return exits.OK


@session_app.command("rename")
def rename_session(
    session_id: SessionId,
    title: Annotated[str, typer.Argument(help="The new title.")],
    url: Url = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Give a session a new title."""
    if not title.strip():
        raise typer.BadParameter("the title is empty", param_hint="TITLE")
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db)
    run_command(_rename(target, session_id, title))


async def _rename(target: Target, session_id: str, title: str) -> int:
    async with connect(target) as client:
        session = await client.update_session(session_id, title=title)
    typer.echo(f"{session.id}: {session.title}")
    return exits.OK


class ExportFormat(StrEnum):
    json = "json"
    markdown = "markdown"


@session_app.command("export")
def export_session(
    session_id: SessionId,
    output_format: Annotated[
        ExportFormat, typer.Option("--format", help="json (as the API returns it) or markdown.")
    ] = ExportFormat.json,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file instead of stdout.", dir_okay=False),
    ] = None,
    url: Url = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Export a session and all its messages."""
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db)
    run_command(_export(target, session_id, output_format, output))


async def _export(target: Target, session_id: str, output_format: ExportFormat, output: Path | None) -> int:
    async with connect(target) as client:
        session = await client.get_session(session_id)
        pages = [page.items async for page in client.message_pages(session_id)]
    # Pages come newest first, each oldest first.
    messages = [message for page in reversed(pages) for message in page]
    text = (
        export_json(session, messages)
        if output_format is ExportFormat.json
        else as_markdown(session, messages)
    )
    if output is None:
        typer.echo(text, nl=False)
    else:
        await asyncio.to_thread(output.write_text, text, encoding="utf-8")
        typer.echo(f"wrote {output}", err=True)
    return exits.OK


@session_app.command("fork")
def fork_session(
    session_id: SessionId,
    message: Annotated[
        str | None,
        typer.Option("--message", help="Copy only the messages before this one (msg_...)."),
    ] = None,
    url: Url = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Copy a session into a new one; prints the new session's id."""
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db)
    run_command(_fork(target, session_id, message))


async def _fork(target: Target, session_id: str, message_id: str | None) -> int:
    async with connect(target) as client:
        forked = await client.sessions.fork(session_id, message_id)
    typer.echo(forked.id)
    return exits.OK
