"""Session operations behind the HTTP routes: create, read, update, delete, abort. Prompting a
session (persisting the user message and driving the loop) is `SessionPrompt` (session/prompt.py).

One instance per request, bound to the caller's tenant.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime
from pathlib import Path

from agentforge.model import ids
from agentforge.model.events import SESSION_CREATED, SESSION_DELETED, SESSION_UPDATED, Event
from agentforge.model.message import AssistantMessage, WithParts
from agentforge.model.session import Session, SessionTime, StatusIdle
from agentforge.session.errors import InvalidInputError, NotFoundError
from agentforge.session.events import now_ms
from agentforge.session.inputs import SessionCreateInput, SessionUpdateInput
from agentforge.session.scope import TenantScope
from agentforge.session.services import SessionServices
from agentforge.tools import filetime
from agentforge.version import __version__

_SLUG_WORDS = (
    "amber", "brisk", "calm", "dusky", "eager", "fuzzy", "gentle", "hidden", "ivory", "jolly",
    "keen", "lucky", "misty", "noble", "olive", "proud", "quiet", "rapid", "silent", "tidy",
)  # fmt: skip
_SLUG_NOUNS = (
    "anchor", "beacon", "canyon", "delta", "ember", "falcon", "garden", "harbor", "island", "jungle",
    "kernel", "lagoon", "meadow", "nebula", "orbit", "prairie", "quarry", "river", "summit", "tundra",
)  # fmt: skip


def _slug() -> str:
    return f"{secrets.choice(_SLUG_WORDS)}-{secrets.choice(_SLUG_NOUNS)}"


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SessionService:
    def __init__(self, services: SessionServices, tenant_id: str) -> None:
        self.services = services
        self.tenant_id = tenant_id
        self.events = services.events(tenant_id)

    async def scope(self) -> TenantScope:
        """The caller's tenant scope: its workspace, config, agents, models and tools."""
        return await self.services.scope(self.tenant_id)

    # -- sessions ---------------------------------------------------------------------------

    async def get(self, session_id: str) -> Session:
        session = await self.services.store.get_session(self.tenant_id, session_id)
        if session is None:
            raise NotFoundError(f"Session not found: {session_id}")
        return session

    async def create(self, body: SessionCreateInput) -> Session:
        if body.parent_id is not None:
            await self.get(body.parent_id)
        directory = await self._directory(body.directory)
        now = now_ms()
        kind = "Child session" if body.parent_id else "New session"
        session = Session(
            id=ids.descending("ses"),
            slug=_slug(),
            directory=str(directory),
            parent_id=body.parent_id,
            title=body.title or f"{kind} - {_iso_now()}",
            version=__version__,
            time=SessionTime(created=now, updated=now),
            permission=body.permission,
            metadata=body.metadata,
        )
        await self._write_session(SESSION_CREATED, session)
        return session

    async def _directory(self, requested: str | None) -> Path:
        """The session's working directory: the tenant's workspace root or a directory inside it,
        since tools treat it as the boundary they may not leave without permission."""
        scope = await self.scope()
        root = scope.settings.directory
        if requested is None:
            return root
        path = Path(requested)
        if not path.is_absolute():
            raise InvalidInputError(f"directory must be an absolute path, got {requested!r}")
        resolved, root_resolved, is_dir = await asyncio.to_thread(
            lambda: (path.resolve(), root.resolve(), path.is_dir())
        )
        if not is_dir:
            raise InvalidInputError(f"directory {requested!r} does not exist or is not a directory")
        if not resolved.is_relative_to(root_resolved):
            raise InvalidInputError(
                f"directory {requested!r} is outside the server's workspace for this tenant, {root_resolved}"
            )
        boundary = scope.confinement.boundary
        if boundary is not None and not boundary.contains(resolved):
            # Inside the workspace, but not the tenant's: the server's data, another tenant's root.
            raise InvalidInputError(f"directory {requested!r} is not this tenant's to work in")
        return path

    async def update(self, session_id: str, body: SessionUpdateInput) -> Session:
        session = await self.get(session_id)
        if body.title is not None:
            session.title = body.title
        if body.permission is not None:
            session.permission = [*(session.permission or []), *body.permission]
        if body.time is not None and body.time.archived is not None:
            session.time.archived = body.time.archived
        session.time.updated = now_ms()
        await self._write_session(SESSION_UPDATED, session)
        return session

    async def delete(self, session_id: str) -> None:
        session = await self.get(session_id)
        for child in await self.services.store.children(self.tenant_id, session_id):
            await self.delete(child.id)
        await self.services.runners.abort(session_id)
        await self._write_session(SESSION_DELETED, session)
        filetime.forget_session(session_id)  # what it read: no tool of it runs again

    def session_event(self, kind: str, session: Session) -> Event:
        return Event(
            type=kind,
            properties={"sessionID": session.id, "info": session.wire()},
            session_id=session.id,
            tenant_id=self.tenant_id,
        )

    async def _write_session(self, kind: str, session: Session) -> None:
        await self.services.store.write(self.session_event(kind, session))

    # -- messages ---------------------------------------------------------------------------

    async def message(self, session_id: str, message_id: str) -> WithParts:
        await self.get(session_id)
        found = await self.services.store.get_message(self.tenant_id, session_id, message_id)
        if found is None:
            raise NotFoundError(f"Message not found: {message_id}")
        return found

    async def messages(
        self, session_id: str, *, limit: int | None, before: str | None
    ) -> tuple[list[WithParts], str | None]:
        await self.get(session_id)
        try:
            return await self.services.store.list_messages(
                self.tenant_id, session_id, limit=limit, before=before
            )
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from exc

    async def latest_reply(self, session_id: str) -> WithParts | None:
        """The newest assistant message, from the newest page of the session."""
        page, _ = await self.services.store.list_messages(self.tenant_id, session_id, limit=20)
        for item in reversed(page):
            if isinstance(item.info, AssistantMessage):
                return item
        return None

    async def abort(self, session_id: str) -> bool:
        await self.get(session_id)
        await self.services.runners.abort(session_id)
        self.services.status.set(self.tenant_id, session_id, StatusIdle())
        return True
