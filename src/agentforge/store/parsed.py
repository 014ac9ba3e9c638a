"""Parsed rows shared between history reads: a loop step re-reads its whole history, and parsing
each message and part again (pydantic, holding the GIL the event loop needs) was most of the cost.

`SharedRows.message` / `.part` return the object parsed from a row's JSON, reusing the one parsed
for the same row (tenant, id) when its JSON is unchanged. Objects handed out this way are shared
by every read that gets them, so whoever receives them treats them as read-only and changes a copy
(`model_copy`); the loop does (and hands plugins deep copies). Bounded: past `max_rows` rows or
`max_chars` characters of JSON, everything is forgotten and parsing starts over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, TypeVar

from agentforge.model.message import Message, message_adapter, part_adapter
from agentforge.model.part import Part

MAX_ROWS: Final = 20_000
MAX_CHARS: Final = 16 * 1024 * 1024

_Key = tuple[str, str]  # (tenant, row id): ids are client-chosen in places, never shared across tenants
_T = TypeVar("_T")


class SharedRows:
    def __init__(self, *, max_rows: int = MAX_ROWS, max_chars: int = MAX_CHARS) -> None:
        self._messages: dict[_Key, tuple[str, Message]] = {}
        self._parts: dict[_Key, tuple[str, Part]] = {}
        self._chars = 0
        self._max_rows = max_rows
        self._max_chars = max_chars
        self._lock = threading.Lock()  # the store's reader threads share one instance

    def __len__(self) -> int:
        return len(self._messages) + len(self._parts)

    def message(self, tenant_id: str, row_id: str, data: str) -> Message:
        return self._parsed(self._messages, (tenant_id, row_id), data, message_adapter.validate_json)

    def part(self, tenant_id: str, row_id: str, data: str) -> Part:
        return self._parsed(self._parts, (tenant_id, row_id), data, part_adapter.validate_json)

    def _parsed(
        self, rows: dict[_Key, tuple[str, _T]], key: _Key, data: str, parse: Callable[[str], _T]
    ) -> _T:
        hit = rows.get(key)
        if hit is not None and hit[0] == data:
            return hit[1]
        parsed = parse(data)
        with self._lock:
            if hit is not None and rows.get(key) is hit:
                del rows[key]
                self._chars -= len(hit[0])
            if len(self) >= self._max_rows or self._chars + len(data) > self._max_chars:
                self._messages.clear()
                self._parts.clear()
                self._chars = 0
            rows[key] = (data, parsed)
            self._chars += len(data)
        return parsed
