"""What text and reasoning parts hold while they stream: the bus's in-memory view of open parts.

A part's durable `message.part.updated` events carry its text only when it starts (empty) and when
it ends; in between the text grows by broadcast deltas. A client that (re)connects mid-part gets a
snapshot of each open part first (its text so far, as the deltas before the snapshot built it), then
the deltas after it, so it renders exactly the text the part ends with. The view follows the bus
synchronously (a listener), so a snapshot taken right after subscribing lines up with that
subscription's first event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from agentforge.model import events as ev
from agentforge.model.events import Event

STREAMED_PART_TYPES: Final = frozenset({"text", "reasoning"})


@dataclass(slots=True)
class _OpenPart:
    event: Event  # the part's last full update
    chunks: list[str] = field(default_factory=list)  # its text so far, joined on demand


class InflightParts:
    """The open text/reasoning parts of every session, fed by every published event."""

    def __init__(self) -> None:
        self._parts: dict[str, _OpenPart] = {}

    def __len__(self) -> int:
        return len(self._parts)

    def observe(self, event: Event) -> None:
        kind = event.type
        if kind == ev.PART_DELTA:
            self._grow(event.properties)
        elif kind == ev.PART_UPDATED:
            self._update(event)
        elif kind == ev.PART_REMOVED:
            self._parts.pop(str(event.properties.get("partID")), None)
        elif kind == ev.MESSAGE_UPDATED:
            info = event.properties.get("info") or {}
            if (info.get("time") or {}).get("completed") is not None:
                self._drop(lambda p: p.get("messageID") == info.get("id"))
        elif kind == ev.MESSAGE_REMOVED:
            self._drop(lambda p: p.get("messageID") == event.properties.get("messageID"))
        elif kind == ev.SESSION_DELETED:
            self._drop(lambda p: p.get("sessionID") == event.session_id)

    def snapshot(self, accept: Callable[[Event], bool]) -> list[Event]:
        """A `message.part.updated` (no seq: not from the log) per open part `accept` lets through."""
        found: list[Event] = []
        for open_part in self._parts.values():
            if not accept(open_part.event):
                continue
            properties = dict(open_part.event.properties)
            properties["part"] = {**properties["part"], "text": "".join(open_part.chunks)}
            found.append(
                Event(
                    type=ev.PART_UPDATED,
                    properties=properties,
                    session_id=open_part.event.session_id,
                    tenant_id=open_part.event.tenant_id,
                )
            )
        return found

    def _update(self, event: Event) -> None:
        part: dict[str, Any] = event.properties.get("part") or {}
        part_id = str(part.get("id"))
        # Streaming: a text or reasoning part that has started and not ended (a user's text part has
        # no time at all).
        span = part.get("time") or {}
        if part.get("type") not in STREAMED_PART_TYPES or "start" not in span or span.get("end") is not None:
            self._parts.pop(part_id, None)
            return
        self._parts[part_id] = _OpenPart(event, [str(part.get("text") or "")])

    def _grow(self, properties: dict[str, Any]) -> None:
        open_part = self._parts.get(str(properties.get("partID")))
        if open_part is not None and properties.get("field") == "text":
            open_part.chunks.append(str(properties.get("delta") or ""))

    def _drop(self, matches: Callable[[dict[str, Any]], bool]) -> None:
        for part_id in [k for k, v in self._parts.items() if matches(v.event.properties.get("part") or {})]:
            del self._parts[part_id]
