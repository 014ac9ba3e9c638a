"""What this writer last wrote of each tool part under way (Postgres), so its batch need not read it.

The audit records a tool part's transitions (requested, executed) by comparing its update with the
row it replaces (audit_events.py); on Postgres that row is read in the upsert's statement, an answer
the writer waits for: a round trip more in a batch that could otherwise go in one message with its
COMMIT (held.py). A tool part's row is written a few times while its call runs (pending, running,
its progress, its end), each time by the writer of the replica whose run holds the session. So the
writer remembers the data it last wrote for each part under way, and its next upsert expects the row
to hold exactly that (direct.py `Expected`): the held statement checks it instead of reading it, and
a row found otherwise fails the held message, which is then written again, reading the row.

A part this writer never wrote is expected to have no row only in its first state: a call's part is
created pending (session/tool_part.py), and written pending only then. Any other unknown part is
read. A part's last state (completed, error) is forgotten: a later write (its output pruned) is rare.
Nothing here is trusted: a wrong expectation costs the batch a second writing, never a wrong row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from agentforge.store.direct import NEW, Expected

CAPACITY: Final = 1024  # parts under way; past it the oldest is forgotten (and read next time)
_FIRST: Final = "pending"
_LAST: Final = frozenset({"completed", "error"})


class LastWritten:
    """The data this writer last wrote of each tool part under way, by (tenant, part id)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._data: OrderedDict[tuple[str, str], str] = OrderedDict()

    def expected(self, tenant_id: str, part: Mapping[str, Any]) -> Expected | None:
        """What the part's row should hold before this write of `part`: what this writer last wrote
        there; no row for a part first written in its first state; None: unknown, read it."""
        data = self._data.get((tenant_id, part["id"]))
        if data is not None:
            return Expected(data)
        return NEW if _status(part) == _FIRST else None

    def wrote(self, tenant_id: str, part: Mapping[str, Any], data: str) -> None:
        """This writer wrote `data` as the row of `part` (not yet committed: a batch that fails
        leaves an expectation the next write finds wrong, and reads)."""
        key = (tenant_id, part["id"])
        self._data.pop(key, None)
        if _status(part) in _LAST:
            return
        self._data[key] = data
        if len(self._data) > self._capacity:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


def _status(part: Mapping[str, Any]) -> Any:
    state = part.get("state")
    return state.get("status") if isinstance(state, Mapping) else None
