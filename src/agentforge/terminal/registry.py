"""Every tenant's terminals, the single-use tickets browsers connect with, and the `pty.*` events.

Terminals live in this process only: they end with the server (or a replica) that runs them.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agentforge.bus import Bus
from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.terminal.terminal import PtyInfo, Terminal
from agentforge.tools.process import start_pty
from agentforge.tools.sandbox import CommandSandbox

MAX_TERMINALS_PER_TENANT: Final = 16
TICKET_SECONDS: Final = 60

PTY_CREATED: Final = "pty.created"
PTY_UPDATED: Final = "pty.updated"
PTY_EXITED: Final = "pty.exited"
PTY_DELETED: Final = "pty.deleted"


class TerminalNotFoundError(LookupError):
    def __init__(self, terminal_id: str) -> None:
        super().__init__(f"Terminal not found: {terminal_id}")
        self.terminal_id = terminal_id


class TooManyTerminalsError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Ticket:
    tenant_id: str
    user: str
    terminal_id: str
    expires_at: float


class Terminals:
    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._by_tenant: dict[str, dict[str, Terminal]] = {}
        self._tickets: dict[str, Ticket] = {}  # by the ticket's SHA-256: the ticket itself is not kept

    def _publish(self, tenant_id: str, kind: str, **properties: object) -> None:
        self._bus.publish(Event(type=kind, properties=dict(properties), tenant_id=tenant_id))

    async def create(
        self,
        tenant_id: str,
        *,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        sandbox: CommandSandbox,
        title: str | None,
    ) -> Terminal:
        own = self._by_tenant.setdefault(tenant_id, {})
        if len(own) >= MAX_TERMINALS_PER_TENANT:
            raise TooManyTerminalsError(
                f"A tenant may keep at most {MAX_TERMINALS_PER_TENANT} terminals; remove one first"
            )
        started = await start_pty(argv, cwd=cwd, env=env, sandbox=sandbox)
        terminal_id = ids.ascending("pty")

        def exited(terminal: Terminal) -> None:
            self._publish(tenant_id, PTY_EXITED, id=terminal.id, exitCode=terminal.exit_code)

        terminal = Terminal(terminal_id, title or f"Terminal {len(own) + 1}", argv, str(cwd), started, exited)
        own[terminal_id] = terminal
        self._publish(tenant_id, PTY_CREATED, info=terminal.info().wire())
        return terminal

    def get(self, tenant_id: str, terminal_id: str) -> Terminal:
        found = self._by_tenant.get(tenant_id, {}).get(terminal_id)
        if found is None:
            raise TerminalNotFoundError(terminal_id)
        return found

    def list(self, tenant_id: str) -> list[PtyInfo]:
        return [terminal.info() for terminal in self._by_tenant.get(tenant_id, {}).values()]

    def updated(self, tenant_id: str, terminal: Terminal) -> None:
        self._publish(tenant_id, PTY_UPDATED, info=terminal.info().wire())

    async def remove(self, tenant_id: str, terminal_id: str) -> None:
        terminal = self.get(tenant_id, terminal_id)
        del self._by_tenant[tenant_id][terminal_id]
        await terminal.close()
        self._publish(tenant_id, PTY_DELETED, id=terminal_id)

    def issue_ticket(self, tenant_id: str, user: str, terminal_id: str) -> tuple[str, int]:
        """A single-use ticket that opens this terminal's WebSocket for `TICKET_SECONDS`."""
        self.get(tenant_id, terminal_id)
        now = time.monotonic()
        for key in [k for k, t in self._tickets.items() if t.expires_at <= now]:
            del self._tickets[key]
        ticket = secrets.token_urlsafe(32)
        self._tickets[_digest(ticket)] = Ticket(tenant_id, user, terminal_id, now + TICKET_SECONDS)
        return ticket, TICKET_SECONDS

    def redeem(self, ticket: str, terminal_id: str) -> Ticket | None:
        """The ticket's holder when it is valid for this terminal; it cannot be used again."""
        found = self._tickets.pop(_digest(ticket), None)
        if found is None or found.expires_at <= time.monotonic() or found.terminal_id != terminal_id:
            return None
        return found

    async def close(self) -> None:
        terminals = [t for own in self._by_tenant.values() for t in own.values()]
        self._by_tenant.clear()
        await asyncio.gather(*(terminal.close() for terminal in terminals), return_exceptions=True)


def _digest(ticket: str) -> str:
    return hashlib.sha256(ticket.encode()).hexdigest()
