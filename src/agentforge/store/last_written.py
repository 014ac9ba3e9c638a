"""What this writer last wrote of each tool part under way (Postgres), so its batch need not read it.

The audit records a tool part's transitions (requested, executed) by comparing its update with the
row it replaces (audit_events.py); on Postgres that row is read in the upsert's statement, an answer
the writer waits for: a round trip more in a batch that could otherwise go in one message with its
COMMIT (held.py). A tool part's row is written a few times while its call runs (pending, running,
its progress, its end), each time by the writer of the replica whose run holds the session. So the
writer remembers the data it last wrote for each part under way, and its next upsert expects the row
to hold exactly that (direct.py `ExpectedRow`): the held statement checks it instead of reading it, and
a row found otherwise fails the held message, which is then written again, reading the row.

A part this writer never wrote is expected to have no row only in its first state: a call's part is
created pending (session/tool_part.py), and written pending only then. Any other unknown part is
read. A part's last state (completed, error) is forgotten: a later write (its output pruned) is rare.
What is kept is bounded (parts and characters; a part's data larger than a held message, which its
next write would not fit in either, is not kept). Nothing here is trusted: a wrong expectation
costs the batch a second writing, never a wrong row or audit entry.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from agentforge.model.part import TOOL_FINISHED, ToolStatePending
from agentforge.store.direct import NEW, ExpectedRow
from agentforge.store.held import MAX_HELD_CHARS

CAPACITY: Final = 1024  # parts under way; past it the oldest is forgotten (and read next time)
MAX_CHARS: Final = 8 * MAX_HELD_CHARS  # of their data, all parts together
_FIRST: Final = ToolStatePending().status


class LastWritten:
    """The data this writer last wrote of each tool part under way, by (tenant, part id)."""

    def __init__(self, capacity: int = CAPACITY, max_chars: int = MAX_CHARS) -> None:
        self._capacity, self._max_chars = capacity, max_chars
        self._data: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._chars = 0

    def expected(self, tenant_id: str, part: Mapping[str, Any]) -> ExpectedRow | None:
        """What the part's row should hold before this write of `part`: what this writer last wrote
        there; no row for a part first written in its first state; None: unknown, read it."""
        data = self._data.get((tenant_id, part["id"]))
        if data is not None:
            return ExpectedRow(data)
        return NEW if _status(part) == _FIRST else None

    def wrote(self, tenant_id: str, part: Mapping[str, Any], data: str) -> None:
        """This writer wrote `data` as the row of `part` (not yet committed: a batch that fails
        leaves an expectation the next write finds wrong, and reads)."""
        key = (tenant_id, part["id"])
        self._chars -= len(self._data.pop(key, ""))
        if _status(part) in TOOL_FINISHED or len(data) > min(MAX_HELD_CHARS, self._max_chars):
            return
        self._data[key] = data
        self._chars += len(data)
        while len(self._data) > self._capacity or self._chars > self._max_chars:
            self._chars -= len(self._data.popitem(last=False)[1])

    def __len__(self) -> int:
        return len(self._data)


def _status(part: Mapping[str, Any]) -> Any:
    state = part.get("state")
    return state.get("status") if isinstance(state, Mapping) else None
