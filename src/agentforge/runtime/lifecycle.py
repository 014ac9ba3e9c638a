"""Readiness and the graceful stop of a runtime.

Readiness answers "may a load balancer send this instance work": the database answers, its schema is
at the migrations' head, the writer runs, and the server is not draining. Draining (SIGTERM) refuses
new turns at once (503), gives the running ones `server.shutdown_grace` seconds, closes what is left
as interrupted, and tells every event stream to reconnect elsewhere (`server.shutdown`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from agentforge.model.events import SERVER_SHUTDOWN, Event
from agentforge.runtime.runtime import Runtime
from agentforge.store.migrate import head_revision

log = logging.getLogger(__name__)

# A database that does not answer within this is as good as unreachable for a readiness probe.
PROBE_TIMEOUT_SECONDS: Final = 3.0


async def readiness(runtime: Runtime, *, timeout: float = PROBE_TIMEOUT_SECONDS) -> dict[str, str]:
    """Each check's failure, by name (empty: ready)."""
    failed: dict[str, str] = {}
    if not runtime.runners.accepting:
        failed["lifecycle"] = "the server is shutting down"
    if not runtime.store.writer_alive:
        failed["writer"] = "the store's writer has stopped"
    try:
        revision = await asyncio.wait_for(runtime.store.schema_revision(), timeout)
    except Exception as exc:  # whatever the driver raises: the database cannot be read
        # The probe is unauthenticated: the driver's message (hosts, roles) goes to the log only.
        log.warning("readiness: the database cannot be read: %s: %s", type(exc).__name__, exc)
        failed["database"] = f"unreachable ({type(exc).__name__})"
        return failed
    head = await asyncio.to_thread(head_revision)
    if revision != head:
        failed["migrations"] = f"the database is at {revision}, the code expects {head}"
    return failed


async def drain(runtime: Runtime, grace: float) -> None:
    """Stop taking turns, let the running ones finish for `grace` seconds, interrupt the rest, then
    end every event stream with `server.shutdown`."""
    runtime.runners.stop_accepting()
    running = runtime.runners.running
    if running:
        log.warning("Shutting down: waiting up to %.0fs for %d running turn(s)", grace, running)
        if not await runtime.runners.wait_idle(grace):
            log.warning("Shutting down: closing %d turn(s) as interrupted", runtime.runners.running)
            await runtime.runners.cancel_all()
    shutdown = Event(
        type=SERVER_SHUTDOWN,
        properties={"message": "The server is shutting down; reconnect with Last-Event-ID to resume."},
    )
    runtime.bus.close_all(final=shutdown)
