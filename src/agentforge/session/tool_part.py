"""One tool part's life (KERNEL 3.5): pending -> running -> completed | error, written in one place.

Four paths move tool parts: the model's tool calls (session/tool_calls.py), subtask parts
(session/channels/subtask.py), the user's shell route (session/channels/shell.py) and start-up
recovery (runtime/recovery.py). Each wraps its part in a `ToolPartLifecycle`, so which transitions
exist, the times they stamp and what each state keeps from the one before are decided here only.

Every transition writes the part through the session's write intents (`submit_part`, not awaited:
the store's writer keeps order) and returns that pending write, or None when the part was already
past the state it would move from (a duplicate event, a call finished before the turn was
abandoned). A finished part never changes again.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.model.part import (
    CompletedTime,
    ErrorTime,
    FilePart,
    RunningTime,
    ToolPart,
    ToolStateCompleted,
    ToolStateError,
    ToolStatePending,
    ToolStateRunning,
)
from agentforge.session.events import SessionEvents, now_ms

# The error of a call that never finished: its turn was aborted or its process died.
ABORTED_MESSAGE: Final = "Tool execution aborted"
INTERRUPTED: Final = "interrupted"  # in such a part's metadata

Written = asyncio.Future[Event]


class ToolPartLifecycle:
    """The transitions of one tool part, each written as it happens."""

    def __init__(self, events: SessionEvents, part: ToolPart) -> None:
        self._events = events
        self.part = part

    @classmethod
    def new(
        cls, events: SessionEvents, *, session_id: str, message_id: str, call_id: str, tool: str
    ) -> ToolPartLifecycle:
        """A pending part with a fresh id, not written yet (`write` it, or `start` it at once)."""
        part = ToolPart(
            id=ids.ascending("prt"),
            session_id=session_id,
            message_id=message_id,
            call_id=call_id,
            tool=tool,
            state=ToolStatePending(),
        )
        return cls(events, part)

    @property
    def is_pending(self) -> bool:
        return isinstance(self.part.state, ToolStatePending)

    @property
    def is_finished(self) -> bool:
        return isinstance(self.part.state, ToolStateCompleted | ToolStateError)

    def write(self, *, linger: float = 0.0) -> Written:
        """Write the part as it is now (a pending part, as soon as the model names the tool).
        `linger`: the write may wait that long for the next one, to commit with it (SessionEvents)."""
        return self._events.submit_part(self.part, linger=linger)

    def start(
        self,
        tool_input: dict[str, Any],
        *,
        tool: str | None = None,
        metadata: dict[str, Any] | None = None,
        now: int | None = None,
        linger: float = 0.0,
    ) -> Written | None:
        """pending -> running with the call's input; `tool` renames the call (a repaired name) and
        `metadata` is merged into the part's own (provider data such as signatures). `linger`: as
        `write`'s."""
        if not self.is_pending:
            return None
        if tool is not None:
            self.part.tool = tool
        if metadata:
            self.part.metadata = {**(self.part.metadata or {}), **metadata}
        start = now if now is not None else now_ms()
        self.part.state = ToolStateRunning(input=tool_input, time=RunningTime(start=start))
        return self.write(linger=linger)

    def progress(self, title: str | None, metadata: dict[str, Any]) -> Written | None:
        """Live progress of a running call: its metadata, and its title unless None."""
        state = self.part.state
        if not isinstance(state, ToolStateRunning):
            return None  # only a running part accepts updates
        self.part.state = ToolStateRunning(
            input=state.input,
            title=title if title is not None else state.title,
            metadata=metadata,
            time=state.time,
        )
        return self.write()

    def complete(
        self,
        output: str,
        *,
        title: str,
        metadata: dict[str, Any],
        attachments: list[FilePart] | None = None,
        now: int | None = None,
        linger: float = 0.0,
    ) -> Written | None:
        """running -> completed with the tool's result (`linger`: as `write`'s)."""
        state = self.part.state
        if not isinstance(state, ToolStateRunning):
            return None
        self.part.state = ToolStateCompleted(
            input=state.input,
            output=output,
            title=title,
            metadata=metadata,
            time=CompletedTime(start=state.time.start, end=now if now is not None else now_ms()),
            attachments=attachments or None,
        )
        return self.write(linger=linger)

    def fail(
        self,
        error: str,
        metadata: dict[str, Any] | None = None,
        *,
        now: int | None = None,
        linger: float = 0.0,
    ) -> Written | None:
        """pending or running -> error. `metadata` is merged over what the running tool published
        (kept: bash's output so far is what history hands the model as the result). `linger`: as
        `write`'s."""
        state = self.part.state
        if isinstance(state, ToolStateCompleted | ToolStateError):
            return None
        end = now if now is not None else now_ms()
        if isinstance(state, ToolStateRunning):
            start, published = state.time.start, state.metadata
        else:
            start, published = end, None  # it never ran
        self.part.state = ToolStateError(
            input=state.input,
            error=error,
            metadata={**(published or {}), **(metadata or {})} or None,
            time=ErrorTime(start=start, end=end),
        )
        return self.write(linger=linger)

    def interrupt(self, *, now: int | None = None) -> Written | None:
        """A call that never finished (its turn was abandoned, its process died): an error marked
        `interrupted`."""
        return self.fail(ABORTED_MESSAGE, {INTERRUPTED: True}, now=now)
