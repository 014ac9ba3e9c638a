"""Crash recovery at start-up (ARCHITECTURE "Beyond the anchors"): close every turn left running.

A process that dies mid-turn never runs the processor's cleanup (KERNEL 5.5), so its assistant
message stays open: text and reasoning without `time.end`, tool calls pending or running forever, no
`time.completed`. Such a history would make the model see tool calls without results. Before serving,
every open assistant message is closed the way cleanup would have closed it, plus an abort error that
says why. Writes go through the session events like any other, so clients replaying the log see them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from agentforge.model.errors import aborted_error
from agentforge.model.events import Event
from agentforge.model.message import AssistantMessage, WithParts
from agentforge.model.part import Part, ReasoningPart, SpanTime, TextPart, ToolPart
from agentforge.session.events import SessionEvents, now_ms
from agentforge.session.services import SessionServices
from agentforge.session.tool_part import ToolPartLifecycle
from agentforge.tools.command_ledger import CommandLedger

INTERRUPTED_TURN_MESSAGE: Final = "The server stopped while this turn was running"
log = logging.getLogger(__name__)

RECOVERY_BATCH: Final = 1000


async def close_interrupted_turns(services: SessionServices, ledger: CommandLedger | None = None) -> int:
    """Close every assistant message a previous process left open; returns how many it closed.

    Call it before serving: while the server runs, open messages are turns in progress. Only the
    database's sole live owner recovers: another process (a server, or the CLI running in-process on
    the same data) may be running those turns right now.
    """
    if not await services.store.claim_ownership():
        log.info("Another Agent Forge process owns this database; leaving its open turns alone")
        return 0
    if ledger is not None:
        # First: a command of the crashed run must not complete after its turn is marked aborted.
        # Only dead instances' (command_ledger.py): another live server may share the data dir.
        await asyncio.to_thread(ledger.kill_leftovers)
    expired = await services.permissions.expire_orphans()
    if expired:
        log.warning("Expired %d permission request(s) left pending when the server last stopped", expired)
    closed = 0
    seen: set[str] = set()
    while True:
        batch = [
            (tenant_id, item)
            for tenant_id, item in await services.store.open_assistant_messages(RECOVERY_BATCH)
            if item.info.id not in seen
        ]
        # Nothing new: done (the guard also stops a loop should a closed message still read as open).
        if not batch:
            return closed
        writes: list[asyncio.Future[Event]] = []
        for tenant_id, item in batch:
            seen.add(item.info.id)
            writes.extend(close_turn(services.events(tenant_id), item, now_ms()))
        # Committed before the next read, which must no longer see this batch as open.
        await asyncio.gather(*writes)
        closed += len(batch)


def close_turn(events: SessionEvents, item: WithParts, now: int) -> list[asyncio.Future[Event]]:
    """Submit the writes that close one open assistant message; the message update comes last."""
    info = item.info
    if not isinstance(info, AssistantMessage):
        raise TypeError(f"message {info.id} is not an assistant message")
    writes: list[asyncio.Future[Event]] = []
    for part in item.parts:
        if isinstance(part, ToolPart):
            # A call that never finished is interrupted, keeping what the tool had published (e.g.
            # bash's output preview, which history then hands to the model as the result).
            interrupted = ToolPartLifecycle(events, part).interrupt(now=now)
            if interrupted is not None:
                writes.append(interrupted)
        elif close_span(part, now):
            writes.append(events.submit_part(part))
    if info.error is None:
        info.error = aborted_error(INTERRUPTED_TURN_MESSAGE)
    info.time.completed = now
    writes.append(events.submit_message(info))
    return writes


def close_span(part: Part, now: int) -> bool:
    """End a text or reasoning part left streaming, in place; says whether it changed."""
    if not isinstance(part, TextPart | ReasoningPart) or part.time is None or part.time.end is not None:
        return False
    part.time = SpanTime(start=part.time.start, end=now)
    return True
