"""Real model objects for session-layer tests: a conversation built message by message, oldest first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentforge.model import ids
from agentforge.model.errors import NamedError
from agentforge.model.message import (
    AssistantMessage,
    AssistantPath,
    AssistantTime,
    UserMessage,
    UserTime,
    WithParts,
)
from agentforge.model.part import (
    CompactionPart,
    CompletedTime,
    ErrorTime,
    FilePart,
    ModelRef,
    Part,
    ReasoningPart,
    RunningTime,
    SpanTime,
    StepStartPart,
    SubtaskPart,
    TextPart,
    ToolPart,
    ToolStateCompleted,
    ToolStateError,
    ToolStatePending,
    ToolStateRunning,
)

NOW = 1_700_000_000_000


@dataclass
class Conversation:
    """Appends messages with ascending ids, as the loop writes them."""

    session_id: str = field(default_factory=lambda: ids.descending("ses"))
    messages: list[WithParts] = field(default_factory=list)

    def user(self, *parts: Part | str) -> WithParts:
        info = UserMessage(
            id=ids.ascending("msg"),
            session_id=self.session_id,
            time=UserTime(created=NOW),
            agent="build",
            model=ModelRef(provider_id="fake", model_id="test-model"),
        )
        return self._add(info, parts)

    def assistant(
        self,
        *parts: Part | str,
        parent: WithParts | None = None,
        finish: str | None = "stop",
        summary: bool | None = None,
        error: NamedError | None = None,
    ) -> WithParts:
        parent_id = parent.info.id if parent else self._last_user_id()
        info = AssistantMessage(
            id=ids.ascending("msg"),
            session_id=self.session_id,
            time=AssistantTime(created=NOW, completed=NOW + 1),
            parent_id=parent_id,
            model_id="test-model",
            provider_id="fake",
            mode="build",
            agent="build",
            path=AssistantPath(cwd="/work", root="/work"),
            summary=summary,
            finish=finish,
            error=error,
        )
        return self._add(info, parts)

    def _last_user_id(self) -> str:
        users = [m.info.id for m in self.messages if isinstance(m.info, UserMessage)]
        return users[-1] if users else ids.ascending("msg")

    def _add(self, info: UserMessage | AssistantMessage, parts: tuple[Part | str, ...]) -> WithParts:
        built = [_rebind(text(p) if isinstance(p, str) else p, info) for p in parts]
        item = WithParts(info=info, parts=built)
        self.messages.append(item)
        return item


def _rebind(part: Part, info: UserMessage | AssistantMessage) -> Part:
    """Parts are built before their message exists: give them the message's ids."""
    rebound: Part = part.model_copy(update={"session_id": info.session_id, "message_id": info.id})
    return rebound


def _ids() -> dict[str, str]:
    return {"id": ids.ascending("prt"), "session_id": "ses_pending", "message_id": "msg_pending"}


def text(value: str, *, synthetic: bool | None = None, ignored: bool | None = None) -> TextPart:
    return TextPart(**_ids(), text=value, synthetic=synthetic, ignored=ignored)


def reasoning(value: str) -> ReasoningPart:
    return ReasoningPart(**_ids(), text=value, time=SpanTime(start=NOW, end=NOW + 1))


def step_start() -> StepStartPart:
    return StepStartPart(**_ids())


def file(mime: str, url: str, filename: str | None = None) -> FilePart:
    return FilePart(**_ids(), mime=mime, url=url, filename=filename)


def compaction(*, auto: bool = False) -> CompactionPart:
    return CompactionPart(**_ids(), auto=auto)


def subtask(prompt: str = "look around") -> SubtaskPart:
    return SubtaskPart(**_ids(), prompt=prompt, description="explore", agent="general")


def tool_completed(
    name: str,
    args: dict[str, Any],
    output: str,
    *,
    call_id: str | None = None,
    compacted: int | None = None,
    attachments: list[FilePart] | None = None,
) -> ToolPart:
    state = ToolStateCompleted(
        input=args,
        output=output,
        title=name,
        metadata={},
        time=CompletedTime(start=NOW, end=NOW + 1, compacted=compacted),
        attachments=attachments,
    )
    return ToolPart(**_ids(), call_id=call_id or _call_id(), tool=name, state=state)


def tool_error(
    name: str,
    args: dict[str, Any],
    error: str,
    *,
    metadata: dict[str, Any] | None = None,
    part_metadata: dict[str, Any] | None = None,
) -> ToolPart:
    state = ToolStateError(input=args, error=error, metadata=metadata, time=ErrorTime(start=NOW, end=NOW + 1))
    return ToolPart(**_ids(), call_id=_call_id(), tool=name, state=state, metadata=part_metadata)


def tool_pending(name: str, *, part_metadata: dict[str, Any] | None = None) -> ToolPart:
    return ToolPart(**_ids(), call_id=_call_id(), tool=name, state=ToolStatePending(), metadata=part_metadata)


def tool_running(name: str, args: dict[str, Any]) -> ToolPart:
    state = ToolStateRunning(input=args, time=RunningTime(start=NOW))
    return ToolPart(**_ids(), call_id=_call_id(), tool=name, state=state)


def _call_id() -> str:
    return f"call_{ids.ascending('prt')[-14:]}"
