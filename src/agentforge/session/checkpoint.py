"""Checkpoints of streaming text: a growing text or reasoning part is written while it grows.

Without them a part is stored when it starts (empty) and when it ends, so a crash in between loses
all its text. Each delta asks `grew`; a checkpoint (the part's row overwritten with its text so far,
through the ordered writer, no event) is submitted once `CHECKPOINT_SECONDS` have passed or
`CHECKPOINT_CHARS` have arrived since the last one, and never while the previous one is still
uncommitted: a slow store coalesces checkpoints instead of queueing one per delta (once the pending
one commits, the part is checked again). A crash loses at most the text of one interval. Time is
read through the clock seam; nothing here runs a timer of its own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

from agentforge.clock import Clock
from agentforge.model.part import ReasoningPart, TextPart
from agentforge.session.events import SessionEvents

CHECKPOINT_SECONDS: Final = 0.25
CHECKPOINT_CHARS: Final = 4096


@dataclass(slots=True)
class _Mark:
    time: float  # when the last checkpoint was taken (or the part first grew)
    length: int  # how much text it held
    pending: asyncio.Future[Any] | None = None


class PartCheckpoints:
    """The checkpoint marks of one assistant message's streaming parts."""

    def __init__(
        self,
        events: SessionEvents,
        clock: Clock,
        *,
        seconds: float = CHECKPOINT_SECONDS,
        chars: int = CHECKPOINT_CHARS,
    ) -> None:
        self._events = events
        self._clock = clock
        self._seconds = seconds
        self._chars = chars
        self._marks: dict[str, _Mark] = {}

    def grew(self, part: TextPart | ReasoningPart) -> None:
        """Called after each delta: checkpoint the part if an interval has passed."""
        mark = self._marks.get(part.id)
        now = self._clock.time()
        if mark is None:
            self._marks[part.id] = _Mark(now, 0)
            return
        if mark.pending is not None and not mark.pending.done():
            return
        if len(part.text) - mark.length < self._chars and now - mark.time < self._seconds:
            return
        mark.pending = self._events.checkpoint_part(part)
        mark.time, mark.length = now, len(part.text)
        mark.pending.add_done_callback(lambda _: self._committed(part, mark))

    def _committed(self, part: TextPart | ReasoningPart, mark: _Mark) -> None:
        # What arrived while it was being written may be due now (unless the part has ended).
        if self._marks.get(part.id) is mark and len(part.text) > mark.length:
            self.grew(part)

    def ended(self, part_id: str) -> None:
        """The part's final update is written: no more checkpoints for it."""
        self._marks.pop(part_id, None)
