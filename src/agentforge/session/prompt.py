"""`SessionPrompt`: a prompt's way into a session (the seed's first box, KERNEL 4.2-4.3).

It persists the user message (validating the agent, model and output format, and resolving the
parts: attached files through the read tool's check, session/user_parts.py), then runs or joins the
session's loop through the runner registry until the message is answered. The loop (session/loop.py)
gets its run's handle, the caller's tenant scope and this object, which subagents use to prompt
their child sessions.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from agentforge.agents.registry import Agent
from agentforge.llm.provider import UnknownModelError
from agentforge.model import ids
from agentforge.model.errors import unknown_error
from agentforge.model.events import SESSION_UPDATED
from agentforge.model.message import AssistantMessage, UserMessage, UserTime, WithParts
from agentforge.model.part import ModelRef, Part
from agentforge.model.session import Session, SessionModel, StatusIdle
from agentforge.plugins import calls as hooks
from agentforge.session.access import RequestAccess
from agentforge.session.context.prune import schedule_prune
from agentforge.session.context.surroundings import LookAhead
from agentforge.session.errors import InvalidInputError, NotFoundError
from agentforge.session.events import MessageIdTakenError, PartIdTakenError, now_ms
from agentforge.session.inputs import PromptInput
from agentforge.session.loop import StepAhead, TurnLoop
from agentforge.session.reverted import discard_reverted
from agentforge.session.runner import LeaseAhead, RunHandle
from agentforge.session.scope import TenantScope
from agentforge.session.service import SessionService
from agentforge.session.structured import schema_problem
from agentforge.session.user_parts import PartContext, resolve_parts
from agentforge.store import StoreWriteError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Accepted:
    """A prompt's user message as stored; `new` is False for a retry of a stored one."""

    message: WithParts
    new: bool = True


class SessionPrompt:
    """Prompting the sessions of one tenant (one instance per request)."""

    def __init__(self, sessions: SessionService) -> None:
        self.sessions = sessions
        self.services = sessions.services
        self.tenant_id = sessions.tenant_id
        self.events = sessions.events

    async def prompt(self, session_id: str, body: PromptInput) -> WithParts:
        """Persist the message and run the turn; the reply as written (the user message when
        `noReply`)."""
        self.services.runners.admit()  # before anything is stored
        session = await self.sessions.get(session_id)
        ahead = None if body.no_reply else await self._look_ahead(session)
        # Taken right before the `try` that gives it back: no await between.
        lease = None if body.no_reply else self.services.runners.lease_ahead(session.id, self.tenant_id)
        try:
            accepted = await self.create_user_message(session, body, ahead=ahead, lease=lease)
            user = accepted.message
            if body.no_reply:
                return user
            if not accepted.new:
                return await self._answer_again(session, user.info.id)
            return await self.run(session, user.info.id, ahead=ahead, lease=lease)
        finally:
            _drop(ahead, lease)

    async def prompt_async(self, session_id: str, body: PromptInput) -> None:
        """Persist the message now (so bad input still gets a 4xx) and run the loop in the background."""
        self.services.runners.admit()  # before anything is stored
        session = await self.sessions.get(session_id)
        ahead = None if body.no_reply else await self._look_ahead(session)
        # Taken right before the `try` that gives it back: no await between.
        lease = None if body.no_reply else self.services.runners.lease_ahead(session.id, self.tenant_id)
        try:
            # Queued durably with the message, before the 204: should this process die, another
            # replica runs it.
            accepted = await self.create_user_message(
                session, body, ahead=ahead, queue=not body.no_reply, lease=lease
            )
            user = accepted.message
            if body.no_reply:
                return
            if not accepted.new:
                # A retry: the accepted turn runs (or ran) once. One found unanswered and idle was
                # stored by an attempt that failed before queueing it: run it now.
                if await self._needs_running(session, user.info.id):
                    self.services.spawn(self.run_queued(session, user.info.id))
                return
            queued = self.run_queued(session, user.info.id, ahead=ahead, lease=lease)
            ahead, lease = None, None
            self.services.spawn(queued)
        finally:
            _drop(ahead, lease)

    async def run_queued(
        self,
        session: Session,
        user_id: str,
        *,
        ahead: StepAhead | None = None,
        lease: LeaseAhead | None = None,
    ) -> None:
        """Run an accepted `prompt_async` to its end, then take it off the queue (a cancelled run,
        at shutdown, stays queued for another replica)."""
        try:
            await self.run(session, user_id, ahead=ahead, lease=lease)
        except Exception as exc:  # failed here: it would fail elsewhere too, so it leaves the queue
            log.exception("prompt_async on %s failed", session.id)
            await self._report_crash(session.id, exc)
        finally:
            _drop(ahead, lease)
        await self.services.store.finish_prompts(self.tenant_id, session.id, user_id)

    async def _look_ahead(self, session: Session) -> StepAhead:
        """The system prompt's file system look-up for the turn's first model call, started now: it
        runs off the event loop while the user message is written (which adds the history read
        after it, `create_user_message`)."""
        scope = await self.sessions.scope()
        return StepAhead(look_around=LookAhead(scope.system_context(session.directory)))

    async def create_user_message(
        self,
        session: Session,
        body: PromptInput,
        *,
        ahead: StepAhead | None = None,
        queue: bool = False,
        lease: LeaseAhead | None = None,
    ) -> Accepted:
        """Validate the agent and model, then persist the user message and its parts (KERNEL 4.2).
        Nothing is written when any of it is refused. A client's `messageID` this session already
        holds, for the same content, is a retry: the stored message, not written again. With
        `ahead`, and no run going on in this session (one starts next), the history as the write
        leaves it is read right behind it, for that run's first step (with replicas, once `lease`,
        the session's lease taken meanwhile, is held). `queue`: a new message goes in the prompt
        queue in the same commit (`prompt_async`)."""
        scope = await self.sessions.scope()
        try:
            agent = scope.agents.get(body.agent or scope.agents.default_name)
        except Exception as exc:
            raise InvalidInputError(str(exc)) from exc
        model = _pick_model(scope, session, body, agent.model)
        if body.variant is None:  # KERNEL 4.2: the agent's variant goes with the agent's model
            model.variant = agent.variant_for(model.provider_id, model.model_id)
        if (problem := schema_problem(body.format)) is not None:
            raise InvalidInputError(problem)
        message_id = body.message_id or ids.ascending("msg")
        if body.message_id is not None and not ids.has_prefix(body.message_id, "msg"):
            raise InvalidInputError(f"messageID must be a msg_ id, got {body.message_id!r}")
        _check_part_ids(body)
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
        # Raises InvalidInputError for a file the caller may not attach: nothing is written yet.
        parts = await resolve_parts(self._part_context(scope, session, message_id, agent, body), body.parts)
        hooked = await hooks.user_message(
            self.services.plugins,
            session_id=session.id,
            agent=agent.name,
            model=model,
            message=info,
            parts=parts,
        )
        info, parts = hooked.message, hooked.parts
        if (
            body.message_id is not None
            and (stored := await self._stored(session, body.message_id)) is not None
        ):
            return _retried(stored, info, parts, body)
        await discard_reverted(self.services, self.tenant_id, session)  # a new prompt makes a revert final
        touched = _touched(session, model)
        try:
            # One transaction with the session's update. A loop already running is told as soon as
            # the write is queued, and the loop's next history read waits for it to commit.
            await self.events.write_user_message(
                info,
                parts,
                chosen_id=body.message_id is not None,
                then=[self.sessions.session_event(SESSION_UPDATED, touched)],
                submitted=lambda written: self._submitted(session, written, ahead, lease),
                queue_prompt=queue,
            )
        except PartIdTakenError as exc:
            raise PartIdTakenError(exc.part_id, _part_field(body, exc.part_id)) from None
        except (MessageIdTakenError, StoreWriteError):
            # Deleted while this prompt was on its way: the session is what is missing, not the id.
            await self.sessions.get(session.id)
            if (
                body.message_id is not None
                and (stored := await self._stored(session, body.message_id)) is not None
            ):
                return _retried(stored, info, parts, body)  # the same prompt sent twice at once
            raise
        session.time.updated, session.model = touched.time.updated, touched.model
        return Accepted(WithParts(info=info, parts=parts))

    def _submitted(
        self,
        session: Session,
        written: asyncio.Future[Any],
        ahead: StepAhead | None,
        lease: LeaseAhead | None,
    ) -> None:
        """A user message was queued for writing: the session's loop is told (the running one, or
        the one that starts next), and when none runs, the history is read right behind the message
        for the run about to start."""
        runners = self.services.runners
        noted = runners.note_input(session.id, written)
        if ahead is None or runners.is_busy(session.id):
            return
        if not runners.leases.shared:
            ahead.history = self.services.store.history_after_writes(self.tenant_id, session.id)
        elif lease is not None:
            ahead.history = asyncio.ensure_future(self._history_once_held(session.id, lease))
        else:
            return
        ahead.noted = noted

    async def _history_once_held(self, session_id: str, lease: LeaseAhead) -> list[WithParts]:
        """With replicas, the history is read once this replica holds the session's lease: another
        replica's run of the session has ended by then, its writes durable (a read from before would
        miss them: the run's handle notes only this replica's messages)."""
        if not await lease.held():
            raise LeaseNotHeldError(session_id)
        return await self.services.store.history_after_writes(self.tenant_id, session_id)

    async def _stored(self, session: Session, message_id: str) -> WithParts | None:
        return await self.services.store.get_message(self.tenant_id, session.id, message_id)

    async def _answer_again(self, session: Session, user_id: str) -> WithParts:
        """A retried prompt's answer, as its first attempt got (or will get) it, without a second turn."""
        if not await self.services.runners.is_busy_anywhere(session.id):
            reply = await self._written_reply(session, user_id)
            # Finished only: a run that started since the check may have just written its reply's
            # first state (joined below, it gives the whole reply).
            if reply is not None and _finished(reply):
                return reply
        answer = await self.run(session, user_id)  # joins the run answering it, or runs it
        if isinstance(answer.info, AssistantMessage) and answer.info.parent_id == user_id:
            return answer
        # The run joined went on to a later prompt: this one's reply is the stored one.
        return await self._written_reply(session, user_id) or answer

    async def _needs_running(self, session: Session, user_id: str) -> bool:
        """Idle everywhere and no reply yet: the stored message was never run."""
        if await self.services.runners.is_busy_anywhere(session.id):
            return False
        return await self._written_reply(session, user_id) is None

    async def _written_reply(self, session: Session, user_id: str) -> WithParts | None:
        await self.services.store.barrier()  # a run just ended may not have written its end yet
        return await self._reply_to(session, user_id)

    async def _reply_to(self, session: Session, user_id: str) -> WithParts | None:
        """The newest assistant message answering `user_id` (ids ascend, so it is read from there on)."""
        later = await self.services.store.history(self.tenant_id, session.id, since_message_id=user_id)
        replies = [m for m in later if isinstance(m.info, AssistantMessage) and m.info.parent_id == user_id]
        return replies[-1] if replies else None

    def _part_context(
        self, scope: TenantScope, session: Session, message_id: str, agent: Agent, body: PromptInput
    ) -> PartContext:
        access = RequestAccess.of(
            permissions=self.services.permissions,
            tenant_id=self.tenant_id,
            confinement=scope.confinement,
            data_dir=scope.settings.data_dir,
            session=session,
            message_id=message_id,
            agent=agent,
            tools=body.tools,
        )
        return PartContext(
            session_id=session.id,
            message_id=message_id,
            access=access,
            read_tool=scope.tools.get("read"),
            limits=scope.limits,
        )

    async def run(
        self,
        session: Session,
        user_id: str,
        *,
        ahead: StepAhead | None = None,
        lease: LeaseAhead | None = None,
    ) -> WithParts:
        """Run (or join) the session's loop until the user message `user_id` has been handled.
        `ahead`: the first model call's system prompt look-up, if the run starts here; `lease`: its
        hold on the session's lease, taken ahead (the caller drops what the run did not keep)."""
        # A second time also when the run was on another replica that ended without seeing it;
        # that run starts with nothing read ahead: a run ended since what `ahead` read.
        for attempt in range(2):
            reply = await self.services.runners.ensure_running(
                session.id,
                functools.partial(self._loop_then_prune, session, ahead=ahead if attempt == 0 else None),
                on_idle=lambda: self.services.status.set(self.tenant_id, session.id, StatusIdle()),
                on_crash=lambda exc: self._report_crash(session.id, exc),
                tenant_id=self.tenant_id,
                lease=lease if attempt == 0 else None,
            )
            if reply is None:
                reply = await self.sessions.latest_reply(session.id)
            # A loop that was already finishing when this message landed did not see it: run again.
            if reply is not None and _answers(reply, user_id):
                return reply
        if reply is None:
            raise NotFoundError(f"Session {session.id} produced no reply")
        return reply

    async def _loop_then_prune(
        self, session: Session, handle: RunHandle, ahead: StepAhead | None = None
    ) -> WithParts | None:
        scope = await self.sessions.scope()
        loop = TurnLoop(self.services, scope, session, handle, prompter=self, ahead=ahead)
        reply = await loop.run()
        schedule_prune(self.services, scope, session.id, loop.seen())  # KERNEL 6.6: after each loop exit
        return reply

    async def _report_crash(self, session_id: str, exc: BaseException) -> None:
        self.events.session_error(session_id, unknown_error(f"{type(exc).__name__}: {exc}").wire())


class LeaseNotHeldError(Exception):
    """A history read ahead for a run that does not start with this hold (another replica holds
    the lease, or taking it failed: the run takes it the usual way and reads its history then)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"the lease of session {session_id} was not taken ahead")


def _drop(ahead: StepAhead | None, lease: LeaseAhead | None) -> None:
    """End what a prompt started for a run that did not take it."""
    if ahead is not None:
        ahead.drop()
    if lease is not None:
        lease.drop()


def _finished(reply: WithParts) -> bool:
    info = reply.info
    return isinstance(info, AssistantMessage) and info.time.completed is not None


def _answers(reply: WithParts, user_id: str) -> bool:
    """`reply` was written for the user message `user_id` or one after it (a run that answered a
    later message read this one too). Its parent, not its id: a message whose id was taken before
    the reply's may have been written after the reply's run read its history."""
    info = reply.info
    return isinstance(info, AssistantMessage) and info.parent_id is not None and info.parent_id >= user_id


def _touched(session: Session, model: ModelRef) -> Session:
    """The session as a prompt leaves it: updated now, on the prompt's model. A shallow copy with
    its own time and model (a deep copy cost ~0.1 ms a prompt): `session` itself is left as it was,
    and the copy is only read."""
    return session.model_copy(
        update={
            "time": session.time.model_copy(update={"updated": now_ms()}),
            "model": SessionModel(id=model.model_id, provider_id=model.provider_id, variant=model.variant),
        }
    )


def _pick_model(scope: TenantScope, session: Session, body: PromptInput, agent_model: str | None) -> ModelRef:
    """The request's model, else the agent's, else the session's last one, else the default."""
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


def _retried(stored: WithParts, info: UserMessage, parts: Sequence[Part], body: PromptInput) -> Accepted:
    """`stored` when this prompt is the one it was stored from, else MessageIdTakenError."""
    if not isinstance(stored.info, UserMessage) or not _same_message(stored, info, parts, body):
        raise MessageIdTakenError(info.id)
    return Accepted(stored, new=False)


def _same_message(stored: WithParts, info: UserMessage, parts: Sequence[Part], body: PromptInput) -> bool:
    """The same content: the message's fields and its parts as this prompt resolves them now.

    Left out: ids the server chose, times, the turn's `summary`, and the model unless the request
    names one (without one it follows the session, which later prompts move)."""
    skip = {"time", "summary"} if body.model or body.variant else {"time", "summary", "model"}
    same_info = _content(stored.info.wire(), skip) == _content(info.wire(), skip)
    # Sorted: the store lists parts by id, and a client may have chosen ids in any order.
    return same_info and sorted(_content(p.wire(), {"id"}) for p in stored.parts) == sorted(
        _content(p.wire(), {"id"}) for p in parts
    )


def _content(wire: dict[str, Any], skip: set[str]) -> bytes:
    """`wire` without the `skip` keys, as canonical JSON."""
    return orjson.dumps(
        {key: value for key, value in wire.items() if key not in skip}, option=orjson.OPT_SORT_KEYS
    )


def _check_part_ids(body: PromptInput) -> None:
    """Client-chosen part ids are prt_ ids, each used once in the request (KERNEL 4.2)."""
    seen: set[str] = set()
    for index, part in enumerate(body.parts):
        if part.id is None:
            continue
        if not ids.has_prefix(part.id, "prt"):
            raise InvalidInputError(f"parts[{index}].id must be a prt_ id, got {part.id!r}")
        if part.id in seen:
            raise InvalidInputError(f"parts[{index}].id {part.id} is used twice in this message")
        seen.add(part.id)


def _part_field(body: PromptInput, part_id: str) -> str:
    index = next((i for i, part in enumerate(body.parts) if part.id == part_id), None)
    return "parts[].id" if index is None else f"parts[{index}].id"
