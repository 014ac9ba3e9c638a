"""What the loop, the processor and the tool calls report about their work: the observability seam.

The session layer calls these hooks and knows nothing of logs, metrics or traces; the runtime hands
in an implementation (agentforge/telemetry) through `SessionServices.observer`. Each hook is a
context manager so a tracing implementation can make its span current for the work inside it.
`NULL_OBSERVER` does nothing, for wiring that wants no telemetry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CalledModel:
    """The model a call goes to: the configured provider, the model, the wire protocol (`api`)."""

    provider_id: str
    model_id: str
    api: str


class TurnObservation(Protocol):
    def finish(self, outcome: str) -> None:
        """How the turn ended: completed, error, aborted or failed."""


class ModelCallObservation(Protocol):
    def first_token(self) -> None:
        """The first streamed content arrived (time to first token)."""

    def retry(self, reason: str, attempt: int) -> None: ...

    def usage(self, input_tokens: int, output_tokens: int, cost: float, finish_reason: str) -> None: ...

    def finish(self, error: str | None, content: str | None = None) -> None:
        """The call ended; `error` names its stored error; `content` only when `wants_content`."""


class ToolCallObservation(Protocol):
    def finish(self, status: str, *, refused_by: str | None = None, error: str | None = None) -> None: ...


class SessionObserver(Protocol):
    # Whether message content may be reported (an explicit opt-in: it is the users' data).
    wants_content: bool

    def turn(self, tenant_id: str, session_id: str) -> AbstractContextManager[TurnObservation]: ...

    def model_call(
        self, tenant_id: str, session_id: str, message_id: str, model: CalledModel
    ) -> AbstractContextManager[ModelCallObservation]: ...

    def tool_call(
        self, tenant_id: str, session_id: str, message_id: str, call_id: str, tool: str, tool_input: object
    ) -> AbstractContextManager[ToolCallObservation]: ...


class _Nothing:
    def finish(self, *args: object, **kwargs: object) -> None:
        pass

    def first_token(self) -> None:
        pass

    def retry(self, reason: str, attempt: int) -> None:
        pass

    def usage(self, input_tokens: int, output_tokens: int, cost: float, finish_reason: str) -> None:
        pass


_NOTHING = _Nothing()


@contextmanager
def _nothing() -> Iterator[_Nothing]:
    yield _NOTHING


class NullObserver:
    wants_content = False

    def turn(self, tenant_id: str, session_id: str) -> AbstractContextManager[TurnObservation]:
        return _nothing()

    def model_call(
        self, tenant_id: str, session_id: str, message_id: str, model: CalledModel
    ) -> AbstractContextManager[ModelCallObservation]:
        return _nothing()

    def tool_call(
        self, tenant_id: str, session_id: str, message_id: str, call_id: str, tool: str, tool_input: object
    ) -> AbstractContextManager[ToolCallObservation]:
        return _nothing()


NULL_OBSERVER: SessionObserver = NullObserver()
