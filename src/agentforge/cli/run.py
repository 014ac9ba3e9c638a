"""`agentforge run "message"`: one turn, streamed to the terminal as it happens.

The event stream is opened (and `server.connected` received) before the prompt is posted, so no
event of the turn can be missed. The POST answers with the final assistant message when the turn
ends; the printer then shows anything of it the stream did not (events and the answer travel apart).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from agentforge.cli.connect import Target, connect, run_command
from agentforge.cli.options import ConfigPath, DatabaseUrl, DataDir, Url
from agentforge.cli.render import TurnPrinter
from agentforge.client import (
    AgentForgeConnectionError,
    AgentForgeError,
    AsyncAgentForge,
    ServerEvent,
    parse_model,
)
from agentforge.model.message import WithParts

# After the answer arrives, how long the last events (idle status) may take to follow it.
IDLE_WAIT_SECONDS = 2.0
CONNECT_WAIT_SECONDS = 10.0
# On Ctrl-C, how long to wait for the server to confirm the abort.
ABORT_WAIT_SECONDS = 5.0


def run(
    message: Annotated[str, typer.Argument(help="What to ask the agent.")],
    url: Url = None,
    session: Annotated[str | None, typer.Option("--session", help="Continue this session.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="provider/model to use.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Agent to run the turn.")] = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Send a message and stream the agent's answer."""
    if model is not None:
        try:
            parse_model(model)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--model") from exc
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db)
    run_command(_run(target, message, session_id=session, model=model, agent=agent))


async def _run(
    target: Target, text: str, *, session_id: str | None, model: str | None, agent: str | None
) -> int:
    err = Console(stderr=True, highlight=False)
    async with connect(target) as client:
        if session_id is None:
            session_id = (await client.create_session()).id
        err.print(Text(f"session {session_id}", style="dim"))
        printer = TurnPrinter(sys.stdout, err)
        final = await run_turn(client, session_id, text, printer, model=model, agent=agent)
        return 1 if printer.finish(final) is not None else 0


async def run_turn(
    client: AsyncAgentForge,
    session_id: str,
    text: str,
    printer: TurnPrinter,
    *,
    model: str | None = None,
    agent: str | None = None,
) -> WithParts:
    """Posts one prompt while printing the session's events; aborts the turn if cancelled."""
    async with client.events(session_id) as stream:
        events = aiter(stream)
        await asyncio.wait_for(_until_connected(events), CONNECT_WAIT_SECONDS)
        idle = asyncio.Event()
        pump = asyncio.create_task(_print_events(events, printer, idle))
        try:
            final = await _prompt_or_abort(client, session_id, text, model=model, agent=agent)
            # The turn is over; let its trailing events (final part updates, idle) arrive.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(idle.wait(), IDLE_WAIT_SECONDS)
        finally:
            pump.cancel()
            await asyncio.wait({pump})
        _report_stream_failure(pump, printer)
    return final


async def _prompt_or_abort(
    client: AsyncAgentForge, session_id: str, text: str, *, model: str | None, agent: str | None
) -> WithParts:
    try:
        return await client.prompt(session_id, text, model=model, agent=agent)
    except asyncio.CancelledError:
        # Interrupted (Ctrl-C): stop the turn on the server too instead of leaving it running.
        with contextlib.suppress(AgentForgeError, TimeoutError):
            await asyncio.wait_for(client.abort(session_id), ABORT_WAIT_SECONDS)
        raise


async def _until_connected(events: AsyncIterator[ServerEvent]) -> None:
    async for event in events:
        if event.type == "server.connected":
            return
    raise AgentForgeConnectionError("the event stream closed before it connected")


async def _print_events(
    events: AsyncIterator[ServerEvent], printer: TurnPrinter, idle: asyncio.Event
) -> None:
    async for event in events:
        printer.handle(event)
        if _is_idle(event):
            idle.set()


def _is_idle(event: ServerEvent) -> bool:
    if event.type == "session.idle":
        return True
    status = event.properties.get("status")
    return event.type == "session.status" and isinstance(status, dict) and status.get("type") == "idle"


def _report_stream_failure(pump: asyncio.Task[None], printer: TurnPrinter) -> None:
    """A broken event stream costs only the live view: the answer is still printed in full."""
    if pump.cancelled():
        return
    error = pump.exception()
    if isinstance(error, AgentForgeError):
        printer.show_error(f"live events stopped: {error.message}")
    elif error is not None:
        raise error
