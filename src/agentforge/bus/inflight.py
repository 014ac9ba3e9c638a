"""What text and reasoning parts hold while they stream: the bus's in-memory view of open parts.

A part's durable `message.part.updated` events carry its text only when it starts (empty) and when
it ends; in between the text grows by broadcast deltas. A client that (re)connects mid-part gets a
snapshot of each open part first (its text so far, as the deltas before the snapshot built it), then
the deltas after it, so it renders exactly the text the part ends with. The view follows the bus
synchronously (a listener), so a snapshot taken right after subscribing lines up with that
subscription's first event.

It sees every event this process publishes from the bus's creation on, and a turn publishes its
assistant message before that message's parts: no turn of this process can have started unseen.
Another replica's events (`Bus.deliver`) do not feed it: their deltas from before this replica
listened are lost to it, so it could not rebuild their text (docs/events.md, "Snapshots").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from agentforge.model import events as ev
from agentforge.model.events import Event

STREAMED_PART_TYPES: Final = frozenset({"text", "reasoning"})
# What one snapshot may carry in all: past it the rest of the open parts are left out (each one's
# durable update at its end still carries its whole text), so a connect costs a bounded amount.
MAX_SNAPSHOT_CHARS: Final = 4 * 1024 * 1024

_Key = tuple[str, str]  # (tenant, id): ids are client-chosen in places, so never shared across tenants


@dataclass(slots=True)
class _OpenPart:
    event: Event  # the part's last full update
    chunks: list[str] = field(default_factory=list)  # its text so far, joined on demand
    size: int = 0


class InflightParts:
    """The open text/reasoning parts of the assistant messages being written, fed by every published
    event. Only an assistant message the processor has not completed can hold a streaming part: a
    user's part claiming a start time is not one, whatever it says."""

    def __init__(self) -> None:
        self._parts: dict[_Key, _OpenPart] = {}
        self._writing: dict[_Key, str] = {}  # assistant messages not completed yet -> their session

    def __len__(self) -> int:
        return len(self._parts)

    def observe(self, event: Event) -> None:
        kind, tenant = event.type, event.tenant_id
        if kind == ev.PART_DELTA:
            self._grow(tenant, event.properties)
        elif kind == ev.PART_UPDATED:
            self._update(event)
        elif kind == ev.PART_REMOVED:
            self._parts.pop((tenant, str(event.properties.get("partID"))), None)
        elif kind == ev.MESSAGE_UPDATED:
            self._message(tenant, event.properties.get("info") or {})
        elif kind == ev.MESSAGE_REMOVED:
            self._end_message(tenant, str(event.properties.get("messageID")))
        elif kind == ev.SESSION_DELETED:
            self._drop(lambda p: p.get("sessionID") == event.session_id, tenant)
            for key in [k for k, s in self._writing.items() if k[0] == tenant and s == event.session_id]:
                del self._writing[key]

    def snapshot(self, accept: Callable[[Event], bool]) -> list[Event]:
        """A `message.part.updated` (no seq: not from the log) per open part `accept` lets through,
        up to MAX_SNAPSHOT_CHARS of text in all."""
        found: list[Event] = []
        budget = MAX_SNAPSHOT_CHARS
        for open_part in self._parts.values():
            if not accept(open_part.event) or open_part.size > budget:
                continue
            budget -= open_part.size
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

    def _message(self, tenant: str, info: dict[str, Any]) -> None:
        key = (tenant, str(info.get("id")))
        if info.get("role") == "assistant" and (info.get("time") or {}).get("completed") is None:
            self._writing[key] = str(info.get("sessionID"))
        else:
            self._end_message(tenant, key[1])

    def _end_message(self, tenant: str, message_id: str) -> None:
        self._writing.pop((tenant, message_id), None)
        self._drop(lambda p: p.get("messageID") == message_id, tenant)

    def _update(self, event: Event) -> None:
        part: dict[str, Any] = event.properties.get("part") or {}
        key = (event.tenant_id, str(part.get("id")))
        # Streaming: a text or reasoning part of an assistant message being written that has started
        # and not ended.
        span = part.get("time") or {}
        writing = (event.tenant_id, str(part.get("messageID"))) in self._writing
        streaming = part.get("type") in STREAMED_PART_TYPES and "start" in span and span.get("end") is None
        if not (writing and streaming):
            self._parts.pop(key, None)
            return
        text = str(part.get("text") or "")
        self._parts[key] = _OpenPart(event, [text], len(text))

    def _grow(self, tenant: str, properties: dict[str, Any]) -> None:
        open_part = self._parts.get((tenant, str(properties.get("partID"))))
        if open_part is not None and properties.get("field") == "text":
            delta = str(properties.get("delta") or "")
            open_part.chunks.append(delta)
            open_part.size += len(delta)

    def _drop(self, matches: Callable[[dict[str, Any]], bool], tenant: str) -> None:
        for key, open_part in list(self._parts.items()):
            if key[0] == tenant and matches(open_part.event.properties.get("part") or {}):
                del self._parts[key]
