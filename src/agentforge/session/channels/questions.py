"""Questions a tool asks the people behind a session (KERNEL 1.2, 2.3, 7.7 `question`).

`ask` publishes `question.asked` and waits; `reply` (answers) or `reject` (dismissed) end the wait and
publish `question.replied` / `question.rejected`. Pending questions live in memory: one waiting tool
call each. When the asking call is cancelled (the turn is aborted) its question is withdrawn with a
`question.rejected`, so clients stop showing it. Like a permission request, a question has a deadline
(config `question_timeout`, seconds, default 300): then it is withdrawn (`question.rejected` with
`reason: "timeout"`) and the model is told nobody answered, so a run never hangs on an empty room.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.config import Config, ConfigError
from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.tools.builtin.question import QuestionExpiredError, QuestionRejectedError

QUESTION_ASKED: Final = "question.asked"
QUESTION_REPLIED: Final = "question.replied"
QUESTION_REJECTED: Final = "question.rejected"

Publish = Callable[[Event], None]
# Replicas: (tenant, request id, answers or None to dismiss) -> whether another process had it.
ForwardAnswer = Callable[[str, str, list[list[str]] | None], Awaitable[bool]]
# Replicas: (tenant) -> the questions waiting in the other processes.
ListElsewhere = Callable[[str], Awaitable[list[dict[str, Any]]]]
DEFAULT_TIMEOUT_SECONDS = 300.0


@dataclass(slots=True)
class _Pending:
    tenant_id: str
    session_id: str
    request: dict[str, Any]  # the `question.asked` properties, also what `GET /question` lists
    answer: asyncio.Future[list[list[str]]]


class QuestionService:
    """`publish` puts broadcast events on the bus; the runtime passes one that keeps them behind
    durable writes already submitted (so `question.asked` never overtakes its running tool part).
    `clock` runs the deadlines (a fake one in tests)."""

    def __init__(
        self,
        publish: Publish,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if timeout_seconds < 0:
            raise ValueError("question_timeout must not be negative")
        self._publish = publish
        self._clock = clock
        self.timeout_seconds = timeout_seconds
        self._pending: dict[str, _Pending] = {}
        # Replicas: hands an answer for a question waiting in another process to that process.
        self.forward: ForwardAnswer | None = None
        self.elsewhere: ListElsewhere | None = None

    @classmethod
    def from_config(cls, publish: Publish, config: Config, *, clock: Clock = SYSTEM_CLOCK) -> QuestionService:
        """The deadline from the config key `question_timeout` (seconds, default 300)."""
        timeout = getattr(config, "question_timeout", None)
        if timeout is None:
            timeout = DEFAULT_TIMEOUT_SECONDS
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise ConfigError(f"question_timeout must be a number of seconds >= 0, got {timeout!r}")
        return cls(publish, timeout_seconds=float(timeout), clock=clock)

    async def ask(
        self,
        tenant_id: str,
        session_id: str,
        questions: list[dict[str, Any]],
        *,
        message_id: str,
        call_id: str,
    ) -> list[list[str]]:
        """Wait for the answers: one list of chosen labels (or typed text) per question.

        Raises QuestionRejectedError when the question is dismissed, QuestionExpiredError when
        nobody answered before the deadline."""
        request_id = ids.ascending("que")
        request = {
            "id": request_id,
            "sessionID": session_id,
            "questions": questions,
            "tool": {"messageID": message_id, "callID": call_id},
        }
        pending = _Pending(tenant_id, session_id, request, asyncio.get_running_loop().create_future())
        self._pending[request_id] = pending
        self._announce(QUESTION_ASKED, pending, request)
        deadline = asyncio.create_task(self._expire_at_deadline(request_id))
        try:
            return await pending.answer
        finally:
            deadline.cancel()
            if self._pending.pop(request_id, None) is not None:
                # Nobody answered and the call is over (cancelled): withdraw the question.
                self._announce_rejected(pending)

    async def answer(self, tenant_id: str, request_id: str, answers: list[list[str]]) -> bool:
        """Answer a question waiting here or (replicas) in another process; False when none has it."""
        if self.reply(tenant_id, request_id, answers):
            return True
        return self.forward is not None and await self.forward(tenant_id, request_id, answers)

    async def dismiss(self, tenant_id: str, request_id: str) -> bool:
        """Dismiss a question waiting here or (replicas) in another process; False when none has it."""
        if self.reject(tenant_id, request_id):
            return True
        return self.forward is not None and await self.forward(tenant_id, request_id, None)

    def reply(self, tenant_id: str, request_id: str, answers: list[list[str]]) -> bool:
        """Answer a question pending here; False when the tenant has no such question here."""
        pending = self._take(tenant_id, request_id)
        if pending is None:
            return False
        self._announce(
            QUESTION_REPLIED,
            pending,
            {"sessionID": pending.session_id, "requestID": request_id, "answers": answers},
        )
        pending.answer.set_result(answers)
        return True

    def reject(self, tenant_id: str, request_id: str) -> bool:
        """Dismiss a question pending here; False when the tenant has no such question here."""
        pending = self._take(tenant_id, request_id)
        if pending is None:
            return False
        self._announce_rejected(pending)
        pending.answer.set_exception(QuestionRejectedError())
        return True

    def reject_session(self, tenant_id: str, session_id: str) -> int:
        """Dismiss every pending question of a session; how many there were."""
        found = [
            request_id
            for request_id, pending in self._pending.items()
            if pending.tenant_id == tenant_id and pending.session_id == session_id
        ]
        return sum(self.reject(tenant_id, request_id) for request_id in found)

    def pending(self, tenant_id: str) -> list[dict[str, Any]]:
        """The tenant's questions waiting for an answer, oldest first."""
        return [pending.request for pending in self._pending.values() if pending.tenant_id == tenant_id]

    async def listed(self, tenant_id: str) -> list[dict[str, Any]]:
        """`GET /question`: the tenant's questions waiting here or (replicas) in any process."""
        found = {request["id"]: request for request in self.pending(tenant_id)}
        if self.elsewhere is not None:
            for request in await self.elsewhere(tenant_id):
                found.setdefault(request["id"], request)
        return [found[request_id] for request_id in sorted(found)]  # ids ascend with time

    def for_tenant(self, tenant_id: str) -> TenantQuestions:
        return TenantQuestions(self, tenant_id)

    def _take(self, tenant_id: str, request_id: str) -> _Pending | None:
        pending = self._pending.get(request_id)
        if pending is None or pending.tenant_id != tenant_id or pending.answer.done():
            return None
        del self._pending[request_id]
        return pending

    async def _expire_at_deadline(self, request_id: str) -> None:
        await self._clock.sleep(self.timeout_seconds)
        pending = self._pending.pop(request_id, None)
        if pending is None or pending.answer.done():
            return
        self._announce_rejected(pending, reason="timeout")
        pending.answer.set_exception(QuestionExpiredError(self.timeout_seconds))

    def _announce_rejected(self, pending: _Pending, *, reason: str | None = None) -> None:
        properties = {"sessionID": pending.session_id, "requestID": pending.request["id"]}
        if reason is not None:
            properties["reason"] = reason
        self._announce(QUESTION_REJECTED, pending, properties)

    def _announce(self, kind: str, pending: _Pending, properties: dict[str, Any]) -> None:
        self._publish(
            Event(
                type=kind,
                properties=properties,
                session_id=pending.session_id,
                tenant_id=pending.tenant_id,
            )
        )


class TenantQuestions:
    """The service bound to one tenant: the `QuestionAsker` the question tool finds in `ctx.extra`."""

    def __init__(self, service: QuestionService, tenant_id: str) -> None:
        self._service = service
        self._tenant_id = tenant_id

    async def ask(
        self, session_id: str, questions: list[dict[str, Any]], *, message_id: str, call_id: str
    ) -> list[list[str]]:
        return await self._service.ask(
            self._tenant_id, session_id, questions, message_id=message_id, call_id=call_id
        )
