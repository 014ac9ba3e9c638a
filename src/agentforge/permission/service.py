"""The ask/reply service (KERNEL 7.4, ARCHITECTURE "approval gates").

`ask` evaluates a tool's request against the call's rules. A deny fails at once, an allow returns; an
`ask` becomes a persisted request with a deadline (`permission.asked`), and the tool waits on a future
until somebody replies over HTTP, a policy hook decides, or the deadline timer applies the configured
default. Every decision is written as `permission.replied` with who made it. Both are durable events
of the session, so the request and its decision are stored by the projector and replayable.

`always` approvals are kept per session in memory, loaded once per session from the stored requests
whose decision was `always`, so they survive a restart. Requests only wait inside this process: after
a restart nobody can answer an old pending row, so `pending()` lists the live waiters only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Literal

from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.clock import now_ms as clock_ms
from agentforge.config import Config, ConfigError
from agentforge.model import ids
from agentforge.model.events import PERMISSION_ASKED, PERMISSION_REPLIED, Event
from agentforge.model.permission import (
    PermissionDecision,
    PermissionReply,
    PermissionRequestInfo,
    PermissionRequestTime,
    PermissionStatus,
    PermissionToolRef,
)
from agentforge.permission.errors import CorrectedError, DeniedError, ExpiredError, RejectedError
from agentforge.permission.rules import Rule, RuleSource, evaluate, merge, wildcard_match
from agentforge.store.batch import StoreWriteError
from agentforge.store.store import Store
from agentforge.tools.base import PermissionDeniedError, PermissionRequest

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 300.0
DefaultAction = Literal["deny", "allow"]


class UnknownPermissionRequestError(LookupError):
    """No request with this id is waiting (for this tenant)."""


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """What a policy hook (a plugin) decided instead of asking a person; `by` names the decider."""

    action: Literal["allow", "deny"]
    by: str


# Called with each request that would be asked; None leaves it to a person.
PolicyHook = Callable[[PermissionRequestInfo], Awaitable[PolicyDecision | None]]


@dataclass(slots=True)
class _Waiting:
    info: PermissionRequestInfo
    tenant_id: str
    rules: RuleSource
    # The error to raise in the asking tool, or None to let it go on.
    outcome: asyncio.Future[PermissionDeniedError | None]
    deadline: asyncio.Task[None] | None = None


@dataclass(frozen=True, slots=True)
class _Decision:
    reply: PermissionReply
    status: PermissionStatus
    decision: PermissionDecision
    by: str
    feedback: str | None = None
    error: PermissionDeniedError | None = None


@dataclass(slots=True)
class _Approvals:
    rules: list[Rule] = field(default_factory=list)
    loaded: bool = False


# (tenant, request id, reply, message, user) -> False when no process waits on that request.
ForwardReply = Callable[[str, str, PermissionReply, str | None, str], Awaitable[bool]]


class PermissionService:
    """One per server. All state lives on the event loop; no method blocks it."""

    def __init__(
        self,
        store: Store,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        default: DefaultAction = "deny",
        policies: Iterable[PolicyHook] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`clock` stamps the requests and runs their deadlines (a fake one in tests)."""
        if timeout_seconds < 0:
            raise ValueError("permission_timeout must not be negative")
        self._store = store
        self._clock = clock
        # Replicas: hands a reply for a request waiting in another process to that process.
        self.forward_reply: ForwardReply | None = None
        # Replicas: `listed` reads the pending requests of every process from the store.
        self.shared = False
        self.timeout_seconds = timeout_seconds
        self.default: DefaultAction = default
        self.policies: list[PolicyHook] = list(policies)
        self._waiting: dict[str, _Waiting] = {}
        self._approvals: dict[str, _Approvals] = {}

    @classmethod
    def from_config(cls, store: Store, config: Config, *, clock: Clock = SYSTEM_CLOCK) -> PermissionService:
        """Deadline and default from the config keys `permission_timeout` (seconds, default 300) and
        `permission_default` ("deny", the default, or "allow")."""
        timeout = getattr(config, "permission_timeout", None)
        default = getattr(config, "permission_default", None) or "deny"
        if timeout is None:
            timeout = DEFAULT_TIMEOUT_SECONDS
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise ConfigError(f"permission_timeout must be a number of seconds >= 0, got {timeout!r}")
        if default == "allow":
            return cls(store, timeout_seconds=float(timeout), default="allow", clock=clock)
        if default != "deny":
            raise ConfigError(f'permission_default must be "deny" or "allow", got {default!r}')
        return cls(store, timeout_seconds=float(timeout), default="deny", clock=clock)

    # --- asking ---------------------------------------------------------------------------------

    async def ask(
        self,
        tenant_id: str,
        session_id: str,
        request: PermissionRequest,
        ruleset: RuleSource,
        *,
        message_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """Return when the call may go on; raise a PermissionDeniedError when it may not."""
        # Approvals only turn `ask` into `allow`, so they are looked up (and loaded) only then.
        if await self.allowed_now(tenant_id, session_id, request, ruleset):
            return
        rules = merge(ruleset)
        info = self._new_request(session_id, request, message_id, call_id)
        for policy in self.policies:
            decided = await policy(info)
            if decided is not None:
                await self._record_policy(tenant_id, info, decided)
                return
        await self._wait_for_reply(tenant_id, info, rules)

    async def allowed_now(
        self, tenant_id: str, session_id: str, request: PermissionRequest, ruleset: RuleSource
    ) -> bool:
        """Whether the rules and the session's `always` approvals allow `request` without asking
        anyone (False: it would be asked). Raises DeniedError when a rule denies it."""
        rules = merge(ruleset)
        verdict = _verdict(request.permission, request.patterns, rules, [])
        if isinstance(verdict, DeniedError):
            raise verdict
        if verdict == "allow":
            return True
        approved = await self._approved(tenant_id, session_id)
        return _verdict(request.permission, request.patterns, rules, approved) == "allow"

    def _new_request(
        self, session_id: str, request: PermissionRequest, message_id: str | None, call_id: str | None
    ) -> PermissionRequestInfo:
        created = clock_ms(self._clock)
        tool = None
        if message_id is not None and call_id is not None:
            tool = PermissionToolRef(message_id=message_id, call_id=call_id)
        return PermissionRequestInfo(
            id=ids.ascending("per"),
            session_id=session_id,
            permission=request.permission,
            patterns=list(request.patterns),
            metadata=dict(request.metadata),
            always=list(request.always),
            tool=tool,
            time=PermissionRequestTime(
                created=created, deadline=created + round(self.timeout_seconds * 1000)
            ),
        )

    async def _record_policy(
        self, tenant_id: str, info: PermissionRequestInfo, decided: PolicyDecision
    ) -> None:
        allowed = decided.action == "allow"
        decision = _Decision(
            reply="once" if allowed else "reject",
            status="approved" if allowed else "denied",
            decision="policy",
            by=decided.by,
        )
        # The writer keeps order: awaiting the decision also makes the request durable.
        _log_failure(self._store.submit(self._asked_event(tenant_id, info)))
        await self._store.write(self._replied_event(tenant_id, info, decision))
        if not allowed:
            raise DeniedError.by_policy(decided.by)

    async def _wait_for_reply(self, tenant_id: str, info: PermissionRequestInfo, rules: RuleSource) -> None:
        loop = asyncio.get_running_loop()
        waiting = _Waiting(info=info, tenant_id=tenant_id, rules=rules, outcome=loop.create_future())
        # Registered before the event is published, so a reply that follows it at once finds it.
        self._waiting[info.id] = waiting
        waiting.deadline = asyncio.create_task(self._expire_at_deadline(info.id), name=f"deadline:{info.id}")
        try:
            await self._store.write(self._asked_event(tenant_id, info))
            error = await waiting.outcome
        finally:
            if info.id in self._waiting:
                # The asking tool went away (the turn was aborted) before anybody decided.
                self._decide(waiting, _Decision("reject", "denied", "reject", by="abort"))
        if error is not None:
            raise error

    # --- deciding -------------------------------------------------------------------------------

    async def reply(
        self,
        tenant_id: str,
        request_id: str,
        reply: PermissionReply,
        message: str | None = None,
        user: str = "local",
        *,
        forward: bool = True,
    ) -> None:
        """Answer a waiting request (KERNEL 7.4 step 3); one waiting in another replica is handed to
        it unless `forward` is False. Raises UnknownPermissionRequestError."""
        waiting = self._waiting.get(request_id)
        if waiting is None or waiting.tenant_id != tenant_id:
            hand_over = self.forward_reply if forward else None
            if hand_over is not None and await hand_over(tenant_id, request_id, reply, message, user):
                return
            raise UnknownPermissionRequestError(f"Permission request not found: {request_id}")
        session_id = waiting.info.session_id
        if reply == "reject":
            error = CorrectedError(message) if message else RejectedError()
            writes = [self._decide(waiting, _Decision("reject", "denied", "reject", user, message, error))]
            # One rejection stops the turn: every other call of the session waiting on a person goes too.
            for other in self._waiting_in(session_id):
                writes.append(
                    self._decide(other, _Decision("reject", "denied", "reject", user, None, RejectedError()))
                )
        else:
            writes = [self._decide(waiting, _Decision(reply, "approved", reply, user, message))]
            if reply == "always":
                writes.extend(self._remember(waiting, user))
        await _settle(writes)

    def _remember(self, waiting: _Waiting, user: str) -> list[asyncio.Future[Event] | None]:
        """Keep the request's `always` patterns as allow rules of its session, and release the other
        waiting requests of the session that these now allow."""
        info = waiting.info
        approvals = self._approvals.setdefault(info.session_id, _Approvals())
        approvals.rules.extend(
            Rule(permission=info.permission, pattern=p, action="allow") for p in info.always
        )
        writes: list[asyncio.Future[Event] | None] = []
        for other in self._waiting_in(info.session_id):
            verdict = _verdict(other.info.permission, other.info.patterns, other.rules, approvals.rules)
            if verdict == "allow":
                writes.append(self._decide(other, _Decision("always", "approved", "always", user)))
        return writes

    async def _expire_at_deadline(self, request_id: str) -> None:
        await self._clock.sleep(self.timeout_seconds)
        self._expire(request_id)

    def _expire(self, request_id: str) -> None:
        """The deadline has passed: apply the configured default and record it as a timeout."""
        waiting = self._waiting.get(request_id)
        if waiting is None:
            return
        if self.default == "allow":
            decision = _Decision("once", "approved", "timeout", by="deadline")
        else:
            decision = _Decision(
                "reject", "expired", "timeout", by="deadline", error=ExpiredError(self.timeout_seconds)
            )
        _log_failure(self._decide(waiting, decision))

    def _decide(self, waiting: _Waiting, decision: _Decision) -> asyncio.Future[Event] | None:
        """Forget the request, wake the asking tool and submit the decision (the tool only resumes
        after this returns, so the decision is written before anything the tool writes next).
        Returns the pending write, or None when the store no longer accepts writes."""
        self._waiting.pop(waiting.info.id, None)
        if waiting.deadline is not None and waiting.deadline is not asyncio.current_task():
            waiting.deadline.cancel()
        if not waiting.outcome.done():
            waiting.outcome.set_result(decision.error)
        try:
            return self._store.submit(self._replied_event(waiting.tenant_id, waiting.info, decision))
        except StoreWriteError as exc:
            log.warning("permission decision on %s not stored: %s", waiting.info.id, exc)
            return None

    def reject_session(self, session_id: str, *, by: str = "abort") -> int:
        """Reject every request of the session still waiting (the turn is being aborted)."""
        waiting = self._waiting_in(session_id)
        for item in waiting:
            _log_failure(
                self._decide(item, _Decision("reject", "denied", "reject", by, None, RejectedError()))
            )
        return len(waiting)

    # --- reading --------------------------------------------------------------------------------

    @property
    def waiting_count(self) -> int:
        """Requests of every tenant waiting for a person now."""
        return len(self._waiting)

    def pending(self, tenant_id: str) -> list[PermissionRequestInfo]:
        """Requests of the tenant waiting for an answer, oldest first."""
        found = [w.info for w in self._waiting.values() if w.tenant_id == tenant_id]
        return sorted(found, key=lambda info: info.id)

    async def listed(self, tenant_id: str) -> list[PermissionRequestInfo]:
        """`GET /permission`: the tenant's requests waiting here or (replicas) in any process."""
        local = self.pending(tenant_id)
        if not self.shared:
            return local
        # A request is registered here before its `permission.asked` is stored: merge both.
        found = {info.id: info for info in await self._store.tenant_pending_permission_requests(tenant_id)}
        found.update((info.id, info) for info in local)
        return sorted(found.values(), key=lambda info: info.id)

    def waiting(self, tenant_id: str, request_id: str) -> PermissionRequestInfo | None:
        """The request if it is still waiting for an answer."""
        found = self._waiting.get(request_id)
        return found.info if found is not None and found.tenant_id == tenant_id else None

    def _waiting_in(self, session_id: str) -> list[_Waiting]:
        return [w for w in self._waiting.values() if w.info.session_id == session_id]

    async def _approved(self, tenant_id: str, session_id: str) -> list[Rule]:
        approvals = self._approvals.setdefault(session_id, _Approvals())
        if not approvals.loaded:
            stored = await self._store.permission_requests(tenant_id, session_id, decision="always")
            if not approvals.loaded:  # another ask may have loaded them meanwhile
                approvals.loaded = True
                remembered = [
                    Rule(permission=info.permission, pattern=pattern, action="allow")
                    for info in stored
                    for pattern in info.always
                ]
                approvals.rules[:0] = remembered
        return approvals.rules

    # --- events ---------------------------------------------------------------------------------

    async def expire_orphans(self, *, sessions: Collection[str] | None = None) -> int:
        """Decide the requests a dead process left pending (nobody can answer them any more): status
        expired, decided by "restart". Run at start-up by the database's owner, before serving, and
        by a replica for the `sessions` of a replica that died."""
        decision = _Decision("reject", "expired", "timeout", by="restart")
        seen: set[str] = set()  # a row the write cannot change must not loop forever
        while True:
            orphans = [
                (tenant_id, info)
                for tenant_id, info in await self._store.pending_permission_requests()
                if info.id not in self._waiting
                and info.id not in seen
                and (sessions is None or info.session_id in sessions)
            ]
            if not orphans:
                return len(seen)
            for tenant_id, info in orphans:
                seen.add(info.id)
                await self._store.write(self._replied_event(tenant_id, info, decision))

    @staticmethod
    def _asked_event(tenant_id: str, info: PermissionRequestInfo) -> Event:
        return Event(
            type=PERMISSION_ASKED, properties=info.wire(), session_id=info.session_id, tenant_id=tenant_id
        )

    def _replied_event(self, tenant_id: str, info: PermissionRequestInfo, decision: _Decision) -> Event:
        properties = {
            "sessionID": info.session_id,
            "requestID": info.id,
            "reply": decision.reply,
            "status": decision.status,
            "decision": decision.decision,
            "decidedBy": decision.by,
            "time": clock_ms(self._clock),
        }
        if decision.feedback:
            properties["message"] = decision.feedback
        return Event(
            type=PERMISSION_REPLIED, properties=properties, session_id=info.session_id, tenant_id=tenant_id
        )


def _verdict(
    permission: str, patterns: Iterable[str], rules: RuleSource, approved: list[Rule]
) -> Literal["allow", "ask"] | DeniedError:
    """Deny if any pattern is denied, allow if every one is allowed, else ask (KERNEL 7.4 step 1)."""
    ruleset = merge(rules, approved)
    actions = []
    for pattern in patterns:
        rule = evaluate(permission, pattern, ruleset)
        if rule.action == "deny":
            relevant = [r for r in ruleset.rules if wildcard_match(r.permission, permission)]
            return DeniedError.by_rule(rule, relevant)
        actions.append(rule.action)
    return "allow" if all(action == "allow" for action in actions) else "ask"


async def _settle(writes: list[asyncio.Future[Event] | None]) -> None:
    """Wait for the decision writes; one that was dropped (its session deleted) is only logged."""
    for outcome in await asyncio.gather(*(w for w in writes if w is not None), return_exceptions=True):
        if isinstance(outcome, BaseException):
            log.warning("a permission decision was not stored: %s", outcome)


def _log_failure(written: asyncio.Future[Event] | None) -> None:
    if written is None:
        return

    def check(future: asyncio.Future[Event]) -> None:
        if not future.cancelled() and future.exception() is not None:
            log.warning("a permission decision was not stored: %s", future.exception())

    written.add_done_callback(check)
