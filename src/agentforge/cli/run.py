"""`agentforge run "message"`: one turn, streamed to the terminal as it happens.

The event stream is opened (and `server.connected` received) before the prompt is posted, so no
event of the turn can be missed. The POST answers with the final assistant message when the turn
ends; the printer then shows anything of it the stream did not (events and the answer travel apart).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Coroutine
from enum import StrEnum
from typing import Annotated, Any, Protocol

import typer
from rich.console import Console
from rich.text import Text

from agentforge.cli import exits
from agentforge.cli.connect import Target, connect, run_command
from agentforge.cli.humans import Answerer, Approve, TerminalPrompter
from agentforge.cli.options import ConfigPath, DatabaseUrl, DataDir, Url, Verbose
from agentforge.cli.render import JsonLinesPrinter, TurnPrinter
from agentforge.cli.visible import visible
from agentforge.client import (
    AgentForgeConnectionError,
    AgentForgeError,
    AsyncAgentForge,
    BadRequestError,
    ServerEvent,
    parse_model,
)
from agentforge.model.message import WithParts

# After the answer arrives, how long the last events (idle status) may take to follow it.
IDLE_WAIT_SECONDS = 2.0
CONNECT_WAIT_SECONDS = 10.0
# On Ctrl-C, how long to wait for the server to confirm the abort.
ABORT_WAIT_SECONDS = 5.0
# Events that wait for a person: the spinner stops before they are shown.
_ASKING = frozenset({"permission.asked", "question.asked"})


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


class ApproveMode(StrEnum):
    ask = "ask"
    all = "all"
    none = "none"


class Printer(Protocol):
    def handle(self, event: ServerEvent) -> None: ...
    def started(self) -> None: ...
    def pause(self) -> None: ...
    def footer(self) -> None: ...
    def show_error(self, message: str) -> None: ...
    def finish(self, final: WithParts) -> str | None: ...


RUN_EPILOG = (
    "Exit codes: 0 the turn finished; 1 error (server unreachable or failing, the turn ended with an"
    " error); 2 usage (bad option, argument or config); 3 a permission request was refused or a"
    " question went unanswered; 130 interrupted (the turn is aborted on the server too); 141 the"
    " output was closed, as by `| head -1` (the turn is aborted too)."
)


def run(
    message: Annotated[
        str | None,
        typer.Argument(help="What to ask the agent; `-` (or no argument with piped input) reads stdin."),
    ] = None,
    url: Url = None,
    session: Annotated[str | None, typer.Option("--session", help="Continue this session.")] = None,
    continue_last: Annotated[
        bool,
        typer.Option("--continue", "-c", help="Continue the last session of this directory."),
    ] = False,
    model: Annotated[str | None, typer.Option("--model", help="provider/model to use.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Agent to run the turn.")] = None,
    approve: Annotated[
        ApproveMode | None,
        typer.Option(
            "--approve",
            help="Answer permission requests and questions: ask (on a terminal), all (once each; a"
            " question gets its first option) or none (reject, dismiss) [default: ask on a terminal,"
            " else none].",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        OutputFormat,
        typer.Option("--format", help="text, or json: one event per line on stdout."),
    ] = OutputFormat.text,
    verbose: Verbose = False,
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
    if session is not None and continue_last:
        raise typer.BadParameter("give --session or --continue, not both", param_hint="--continue")
    text = _message_text(message)
    interactive = sys.stdin.isatty() and message != "-"
    mode: Approve = approve.value if approve is not None else ("ask" if interactive else "none")
    if mode == "ask" and not interactive:
        raise typer.BadParameter("asking needs a terminal on stdin; use all or none", param_hint="--approve")
    target = Target(url=url, config_path=config, data_dir=data_dir, database_url=db, verbose=verbose)
    run_command(
        _run(
            target,
            text,
            session_id=session,
            continue_last=continue_last,
            model=model,
            agent=agent,
            approve=mode,
            as_json=output is OutputFormat.json,
        )
    )


def _message_text(message: str | None) -> str:
    """The argument, or stdin for `-` (or no argument when stdin is not a terminal)."""
    if message == "-" or (message is None and not sys.stdin.isatty()):
        text = sys.stdin.read()
    elif message is None:
        raise typer.BadParameter("give a message, `-` or pipe one in", param_hint="MESSAGE")
    else:
        text = message
    if not text.strip():
        raise typer.BadParameter("the message is empty", param_hint="MESSAGE")
    return text


async def _run(
    target: Target,
    text: str,
    *,
    session_id: str | None,
    continue_last: bool,
    model: str | None,
    agent: str | None,
    approve: Approve,
    as_json: bool,
) -> int:
    # Lines are not cut to a width: the terminal wraps them, a pipe or a log file keeps them whole.
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    async with connect(target) as client:
        picked, created = await _pick_session(client, session_id, continue_last=continue_last)
        err.print(Text(f"session {picked}", style="dim"))
        printer: Printer = JsonLinesPrinter(sys.stdout) if as_json else TurnPrinter(sys.stdout, err)
        prompter = TerminalPrompter(err) if approve == "ask" else None
        answerer = Answerer(client, picked, err, approve=approve, prompter=prompter)
        try:
            final = await run_turn(client, picked, text, printer, model=model, agent=agent, answerer=answerer)
        except BadRequestError:
            # Refused whole (400: an unknown model, a bad agent): a transport error or a timeout
            # says nothing of what the server stored, so only a refusal lets the session go.
            if created:
                await _forget_if_empty(client, picked)
            raise
        error = printer.finish(final)
        printer.footer()
    if answerer.refused:
        err.print(Text(visible("[refused] " + "; ".join(answerer.refused)), style="bold yellow"))
        return exits.REFUSED
    if error is not None:
        # The message and the failed answer are stored: the session is worth continuing.
        err.print(Text(f"the session is kept: continue it with --session {picked} (or -c)", style="dim"))
        return exits.ERROR
    return exits.OK


async def _forget_if_empty(client: AsyncAgentForge, session_id: str) -> None:
    """A session this run created whose prompt was refused before anything was stored (an unknown
    model, a bad agent) is deleted: it would only be an empty entry in listings and `--continue`."""
    with contextlib.suppress(AgentForgeError):
        if not (await client.messages(session_id, limit=1)).items:
            await client.delete_session(session_id)


async def _pick_session(
    client: AsyncAgentForge, session_id: str | None, *, continue_last: bool
) -> tuple[str, bool]:
    """The session to prompt, and whether this run created it."""
    if session_id is not None:
        return session_id, False
    if continue_last:
        # Newest first: the last session started (or continued) in this directory.
        found = await client.list_sessions(directory=os.getcwd(), roots=True, limit=1)
        if found:
            return found[0].id, False
    return (await client.create_session()).id, True


async def run_turn(
    client: AsyncAgentForge,
    session_id: str,
    text: str,
    printer: Printer,
    *,
    model: str | None = None,
    agent: str | None = None,
    answerer: Answerer | None = None,
) -> WithParts:
    """Posts one prompt while printing the session's events (and answering what asks for a person);
    aborts the turn if cancelled."""
    async with contextlib.AsyncExitStack() as streams:
        # The session's own events print; the answerer reads the tenant's, where its subagents'
        # sessions (and their requests) appear too. Both streams are connected before the prompt.
        events = aiter(await streams.enter_async_context(client.events(session_id)))
        await asyncio.wait_for(_until_connected(events), CONNECT_WAIT_SECONDS)
        pumps = []
        if answerer is not None:
            everything = aiter(await streams.enter_async_context(client.events()))
            await asyncio.wait_for(_until_connected(everything), CONNECT_WAIT_SECONDS)
            pumps.append(asyncio.create_task(_answer_events(everything, printer, answerer)))
        idle = asyncio.Event()
        printing = asyncio.create_task(_print_events(events, printer, idle))
        pumps.append(printing)
        printer.started()
        try:
            prompt = _prompt_or_abort(client, session_id, text, model=model, agent=agent)
            final = await _unless_output_closes(prompt, printing)
            # The turn is over; let its trailing events (final part updates, idle) arrive.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(idle.wait(), IDLE_WAIT_SECONDS)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.wait(pumps)
            printer.pause()
        for pump in pumps:
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


async def _unless_output_closes(
    prompt: Coroutine[Any, Any, WithParts], printing: asyncio.Task[None]
) -> WithParts:
    """The prompt's answer; but when stdout's reader goes away (BrokenPipeError while printing) the
    prompt is cancelled, which aborts the turn as Ctrl-C does, and the error is raised."""
    answer = asyncio.create_task(prompt)
    try:
        await asyncio.wait({answer, printing}, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done() and not printing.cancelled():
            error = printing.exception()
            if isinstance(error, BrokenPipeError):
                raise error
        return await answer
    finally:
        if not answer.done():
            answer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answer


async def _until_connected(events: AsyncIterator[ServerEvent]) -> None:
    async for event in events:
        if event.type == "server.connected":
            return
    raise AgentForgeConnectionError("the event stream closed before it connected")


async def _answer_events(events: AsyncIterator[ServerEvent], printer: Printer, answerer: Answerer) -> None:
    async for event in events:
        if event.type in _ASKING:
            printer.pause()
        await answerer.handle(event)


async def _print_events(events: AsyncIterator[ServerEvent], printer: Printer, idle: asyncio.Event) -> None:
    async for event in events:
        printer.handle(event)
        if _is_idle(event):
            idle.set()


def _is_idle(event: ServerEvent) -> bool:
    if event.type == "session.idle":
        return True
    status = event.properties.get("status")
    return event.type == "session.status" and isinstance(status, dict) and status.get("type") == "idle"


def _report_stream_failure(pump: asyncio.Task[None], printer: Printer) -> None:
    """A broken event stream costs only the live view: the answer is still printed in full."""
    if pump.cancelled():
        return
    error = pump.exception()
    if isinstance(error, AgentForgeError):
        printer.show_error(f"live events stopped: {error.message}")
    elif error is not None:
        raise error
