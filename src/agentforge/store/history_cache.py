"""The history a loop step reads, kept per session and brought up to date by reading what changed.

`history_since_compaction` used to fetch every message and part row from the compaction boundary on
at each step, so its cost grew with the session. Every transaction that writes a session's messages
or parts bumps `session.history_revision` and stamps the rows with it; a delete also sets
`history_trimmed` (projector.py). `HistoryCache.read` reads those markers first, then only the rows
stamped after the revision its entry is current to (indexed), and merges them into that entry. It
reads everything from the boundary on again when the entry cannot be brought up to date: rows were
deleted (`history_trimmed` moved), the boundary moved, or the session is another one under the same id.

The markers are read from the database on every call, inside the read's transaction, so writes of
any process (replicas) are seen once they commit: an entry is only ever a starting point, never the
answer on its own word. Entries are replaced, never changed, so the reader threads share them with a
lock only around the lookup; bounded by sessions and rows, the least recently used go first. The
messages and parts handed out are shared with later reads: read-only (as `parsed.py`'s).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection, select

from agentforge.model.message import Message, WithParts
from agentforge.model.part import Part
from agentforge.store.parsed import SharedRows
from agentforge.store.queries import AnyRow, history_start
from agentforge.store.schema import message, part, session

MAX_SESSIONS: Final = 256
MAX_ROWS: Final = 20_000

_Key = tuple[str, str]  # (tenant, session)
# (session.time_created, history_revision, history_trimmed): equal markers, equal history.
_Marks = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class _Entry:
    marks: _Marks
    since: str | None  # the first message id read (history_start); None: the whole session
    infos: dict[str, Message]
    parts: dict[str, dict[str, Part]]  # message id -> part id -> part, in part id order
    built: dict[str, WithParts]  # message id -> the message with its parts, in message id order
    rows: int

    @property
    def revision(self) -> int:
        return self.marks[1]


def _empty(since: str | None) -> _Entry:
    return _Entry((0, -1, 0), since, {}, {}, {}, 0)


class HistoryCache:
    def __init__(self, *, max_sessions: int = MAX_SESSIONS, max_rows: int = MAX_ROWS) -> None:
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._rows = 0
        self._max_sessions = max_sessions
        self._max_rows = max_rows
        self._lock = threading.Lock()  # the store's reader threads share one instance

    def __len__(self) -> int:
        return len(self._entries)

    def read(
        self, conn: Connection, tenant_id: str, session_id: str, shared: SharedRows | None = None
    ) -> list[WithParts]:
        """What `queries.history_since_compaction` returns, reading only rows changed since the
        session's last read. Runs in a reader's transaction (`Readers.run`)."""
        key = (tenant_id, session_id)
        marks = _marks(conn, tenant_id, session_id)
        if marks is None:
            self._drop(key)
            return []
        known = self._get(key)
        if known is not None and known.marks == marks:
            return list(known.built.values())
        since = history_start(conn, tenant_id, session_id)
        base = known if known is not None and _continues(known, marks, since) else _empty(since)
        messages, parts = _changed_rows(conn, tenant_id, session_id, since, base.revision)
        entry = _advance(base, marks, messages, parts, tenant_id, shared or SharedRows())
        self._put(key, entry)
        return list(entry.built.values())

    def _get(self, key: _Key) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def _put(self, key: _Key, entry: _Entry) -> None:
        with self._lock:
            held = self._entries.get(key)
            # A concurrent read may have stored a newer entry of the same session: keep that one.
            if held is not None and held.marks[0] == entry.marks[0] and held.revision > entry.revision:
                return
            self._forget(key)
            if entry.rows > self._max_rows:
                return
            self._entries[key] = entry
            self._rows += entry.rows
            while len(self._entries) > self._max_sessions or self._rows > self._max_rows:
                _, oldest = self._entries.popitem(last=False)
                self._rows -= oldest.rows

    def _drop(self, key: _Key) -> None:
        with self._lock:
            self._forget(key)

    def _forget(self, key: _Key) -> None:
        gone = self._entries.pop(key, None)
        if gone is not None:
            self._rows -= gone.rows


_MARKS = select(session.c.time_created, session.c.history_revision, session.c.history_trimmed)


def _marks(conn: Connection, tenant_id: str, session_id: str) -> _Marks | None:
    where = (session.c.id == session_id, session.c.tenant_id == tenant_id)
    row = conn.execute(_MARKS.where(*where)).one_or_none()
    return None if row is None else (row[0], row[1], row[2])


def _continues(known: _Entry, marks: _Marks, since: str | None) -> bool:
    """Whether rows newer than `known` are all that changed: same session, nothing deleted, the same
    boundary, and not older than the database (a rolled-back bump may reuse a revision)."""
    created, revision, trimmed = marks
    return (
        known.marks[0] == created
        and known.marks[2] == trimmed
        and known.since == since
        and known.revision <= revision
    )


def _changed_rows(
    conn: Connection, tenant_id: str, session_id: str, since: str | None, after: int
) -> tuple[list[AnyRow], list[AnyRow]]:
    """The session's message and part rows from `since` on, stamped with a revision above `after`."""
    messages = select(message.c.id, message.c.data).where(
        message.c.tenant_id == tenant_id, message.c.session_id == session_id, message.c.revision > after
    )
    parts = select(part.c.id, part.c.message_id, part.c.data).where(
        part.c.tenant_id == tenant_id, part.c.session_id == session_id, part.c.revision > after
    )
    if since is not None:
        messages = messages.where(message.c.id >= since)
        parts = parts.where(part.c.message_id >= since)
    return list(conn.execute(messages)), list(conn.execute(parts))


def _advance(
    base: _Entry,
    marks: _Marks,
    message_rows: Iterable[AnyRow],
    part_rows: Iterable[AnyRow],
    tenant_id: str,
    shared: SharedRows,
) -> _Entry:
    """A new entry: `base` with the changed rows merged in (`base` itself is left as it was)."""
    infos = dict(base.infos)
    changed: set[str] = set()
    for row in message_rows:
        infos[row.id] = shared.message(tenant_id, row.id, row.data)
        changed.add(row.id)
    touched: dict[str, dict[str, Part]] = {}
    for row in part_rows:
        group = touched.get(row.message_id)
        if group is None:
            group = touched[row.message_id] = dict(base.parts.get(row.message_id, {}))
        group[row.id] = shared.part(tenant_id, row.id, row.data)
    parts = dict(base.parts)
    for message_id, group in touched.items():
        parts[message_id] = dict(sorted(group.items()))
        changed.add(message_id)
    # Ids mostly arrive in order, but a client may choose a user message's id: sort when one is new.
    order: Iterable[str] = base.built if infos.keys() == base.built.keys() else sorted(infos)
    built = {
        message_id: (
            base.built[message_id]
            if message_id not in changed
            else WithParts.model_construct(
                info=infos[message_id], parts=list(parts.get(message_id, {}).values())
            )
        )
        for message_id in order
    }
    rows = len(infos) + sum(len(group) for group in parts.values())
    return _Entry(marks, base.since, infos, parts, built, rows)
