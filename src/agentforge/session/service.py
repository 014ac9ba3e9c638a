"""Session operations behind the HTTP routes: create, read, update, delete, prompt, abort.

One instance per request, bound to the caller's tenant.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from pathlib import Path

from agentforge import __version__
from agentforge.llm.provider import UnknownModelError
from agentforge.model import ids
from agentforge.model.errors import unknown_error
from agentforge.model.events import SESSION_CREATED, SESSION_DELETED, SESSION_UPDATED, Event
from agentforge.model.message import (
    AssistantMessage,
    UserMessage,
    UserTime,
    WithParts,
)
from agentforge.model.part import ModelRef
from agentforge.model.session import Session, SessionModel, SessionTime, StatusIdle
from agentforge.plugins import calls as hooks
from agentforge.runtime.runtime import Runtime
from agentforge.runtime.scope import TenantScope
from agentforge.session.context.prune import schedule_prune
from agentforge.session.events import now_ms
from agentforge.session.inputs import PromptInput, SessionCreateInput, SessionUpdateInput
from agentforge.session.loop import TurnLoop
from agentforge.session.reverted import discard_reverted
from agentforge.session.structured import schema_problem
from agentforge.session.user_parts import PartContext, resolve_parts

log = logging.getLogger(__name__)

_SLUG_WORDS = (
    "amber", "brisk", "calm", "dusky", "eager", "fuzzy", "gentle", "hidden", "ivory", "jolly",
    "keen", "lucky", "misty", "noble", "olive", "proud", "quiet", "rapid", "silent", "tidy",
)  # fmt: skip
_SLUG_NOUNS = (
    "anchor", "beacon", "canyon", "delta", "ember", "falcon", "garden", "harbor", "island", "jungle",
    "kernel", "lagoon", "meadow", "nebula", "orbit", "prairie", "quarry", "river", "summit", "tundra",
)  # fmt: skip


class NotFoundError(Exception):
    pass


class InvalidInputError(Exception):
    pass


def _slug() -> str:
    return f"{secrets.choice(_SLUG_WORDS)}-{secrets.choice(_SLUG_NOUNS)}"


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SessionService:
    def __init__(self, rt: Runtime, tenant_id: str) -> None:
        self.rt = rt
        self.tenant_id = tenant_id
        self.events = rt.events(tenant_id)

    async def scope(self) -> TenantScope:
        """The caller's tenant scope: its workspace, config, agents, models and tools."""
        return await self.rt.scope(self.tenant_id)

    # -- sessions ---------------------------------------------------------------------------

    async def get(self, session_id: str) -> Session:
        session = await self.rt.store.get_session(self.tenant_id, session_id)
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
        root = (await self.scope()).settings.directory
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
        for child in await self.rt.store.children(self.tenant_id, session_id):
            await self.delete(child.id)
        await self.rt.runners.cancel(session_id)
        await self._write_session(SESSION_DELETED, session)

    def _session_event(self, kind: str, session: Session) -> Event:
        return Event(
            type=kind,
            properties={"sessionID": session.id, "info": session.wire()},
            session_id=session.id,
            tenant_id=self.tenant_id,
        )

    async def _write_session(self, kind: str, session: Session) -> None:
        await self.rt.store.write(self._session_event(kind, session))

    # -- messages ---------------------------------------------------------------------------

    async def message(self, session_id: str, message_id: str) -> WithParts:
        await self.get(session_id)
        found = await self.rt.store.get_message(self.tenant_id, session_id, message_id)
        if found is None:
            raise NotFoundError(f"Message not found: {message_id}")
        return found

    async def messages(
        self, session_id: str, *, limit: int | None, before: str | None
    ) -> tuple[list[WithParts], str | None]:
        await self.get(session_id)
        try:
            return await self.rt.store.list_messages(self.tenant_id, session_id, limit=limit, before=before)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from exc

    async def latest_reply(self, session_id: str) -> WithParts | None:
        """The newest assistant message, from the newest page of the session."""
        page, _ = await self.rt.store.list_messages(self.tenant_id, session_id, limit=20)
        for item in reversed(page):
            if isinstance(item.info, AssistantMessage):
                return item
        return None

    # -- prompting --------------------------------------------------------------------------

    async def create_user_message(self, session: Session, body: PromptInput) -> WithParts:
        """Validate the agent and model, then persist the user message and its parts (KERNEL 4.2)."""
        scope = await self.scope()
        await discard_reverted(self.rt, self.tenant_id, session)  # a new prompt makes a revert final
        try:
            agent = scope.agents.get(body.agent or scope.agents.default_name)
        except Exception as exc:
            raise InvalidInputError(str(exc)) from exc
        model = self._pick_model(scope, session, body, agent.model)
        if body.variant is None:  # KERNEL 4.2: the agent's variant goes with the agent's model
            model.variant = agent.variant_for(model.provider_id, model.model_id)
        if (problem := schema_problem(body.format)) is not None:
            raise InvalidInputError(problem)
        message_id = body.message_id or ids.ascending("msg")
        if body.message_id is not None and not ids.has_prefix(body.message_id, "msg"):
            raise InvalidInputError(f"messageID must be a msg_ id, got {body.message_id!r}")
        info = UserMessage(
            id=message_id,
            session_id=session.id,
            time=UserTime(created=now_ms()),
            agent=agent.name,
            model=model,
            format=body.format,
            system=body.system,
            tools=body.tools,
        )
        context = PartContext(
            session_id=session.id,
            message_id=message_id,
            agent=agent.name,
            directory=Path(session.directory),
            data_dir=scope.settings.data_dir,
            read_tool=scope.tools.get("read"),
            limits=scope.limits,
        )
        parts, errors = await resolve_parts(context, body.parts)
        for error in errors:
            self.events.session_error(session.id, unknown_error(error).wire())
        hooked = await hooks.user_message(
            self.rt.plugins, session_id=session.id, agent=agent.name, model=model, message=info, parts=parts
        )
        info, parts = hooked.message, hooked.parts
        if body.message_id is None:
            self.events.submit_message(info)
        else:
            await self.events.write_new_message(info)
        for part in parts:
            self.events.submit_part(part)
        await self._touch(session, model)
        return WithParts(info=info, parts=parts)

    def _pick_model(
        self, scope: TenantScope, session: Session, body: PromptInput, agent_model: str | None
    ) -> ModelRef:
        catalog = scope.catalog
        try:
            if body.model is not None:
                provider_id, model_id = body.model.provider_id, body.model.model_id
            elif agent_model:
                provider_id, model_id = catalog.parse(agent_model)
            elif session.model is not None:
                provider_id, model_id = session.model.provider_id, session.model.id
            else:
                provider_id, model_id = catalog.default_model()
            resolved = catalog.resolve(provider_id, model_id)
        except UnknownModelError as exc:
            raise InvalidInputError(str(exc)) from exc
        if body.variant is not None and body.variant not in resolved.variants:
            known = ", ".join(sorted(resolved.variants)) or "none"
            raise InvalidInputError(
                f"Unknown variant {body.variant!r} for {provider_id}/{model_id}; available: {known}"
            )
        return ModelRef(provider_id=provider_id, model_id=model_id, variant=body.variant)

    async def _touch(self, session: Session, model: ModelRef) -> None:
        session.time.updated = now_ms()
        session.model = SessionModel(id=model.model_id, provider_id=model.provider_id, variant=model.variant)
        # Awaiting this last write also makes the message and parts queued before it durable,
        # so the loop's first history read sees them; a loop already running is told at once.
        written = self.rt.store.submit(self._session_event(SESSION_UPDATED, session))
        self.rt.runners.note_input(session.id, written)
        await asyncio.shield(written)

    async def prompt(self, session_id: str, body: PromptInput) -> WithParts:
        session = await self.get(session_id)
        user = await self.create_user_message(session, body)
        if body.no_reply:
            return user
        return await self.run(session, user.info.id)

    async def run(self, session: Session, user_id: str) -> WithParts:
        """Run (or join) the session's loop until the user message `user_id` has been handled."""
        for _ in range(2):
            reply = await self.rt.runners.ensure_running(
                session.id,
                lambda: self._loop_then_prune(session),
                on_idle=lambda: self.rt.status.set(self.tenant_id, session.id, StatusIdle()),
                on_crash=lambda exc: self._report_crash(session.id, exc),
            )
            if reply is None:
                reply = await self.latest_reply(session.id)
            # A loop that was already finishing when this message landed did not see it: run again.
            if reply is not None and reply.info.id > user_id:
                return reply
        if reply is None:
            raise NotFoundError(f"Session {session.id} produced no reply")
        return reply

    async def _loop_then_prune(self, session: Session) -> WithParts | None:
        scope = await self.scope()
        reply = await TurnLoop(self.rt, scope, session).run()
        schedule_prune(self.rt, scope, session.id)  # KERNEL 6.6: after each loop exit
        return reply

    async def _report_crash(self, session_id: str, exc: BaseException) -> None:
        self.events.session_error(session_id, unknown_error(f"{type(exc).__name__}: {exc}").wire())

    async def prompt_async(self, session_id: str, body: PromptInput) -> None:
        """Persist the message now (so bad input still gets a 4xx) and run the loop in the background."""
        session = await self.get(session_id)
        user = await self.create_user_message(session, body)
        if body.no_reply:
            return

        async def background() -> None:
            try:
                await self.run(session, user.info.id)
            except Exception as exc:
                log.exception("prompt_async on %s failed", session_id)
                await self._report_crash(session_id, exc)

        self.rt.spawn(background())

    async def abort(self, session_id: str) -> bool:
        await self.get(session_id)
        await self.rt.runners.cancel(session_id)
        self.rt.status.set(self.tenant_id, session_id, StatusIdle())
        return True
