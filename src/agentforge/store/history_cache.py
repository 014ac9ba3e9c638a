"""The history a loop step reads, kept per session and brought up to date by reading what changed.

`history_since_compaction` used to fetch every message and part row from the compaction boundary on
at each step, so its cost grew with the session. Every transaction that writes a session's messages
or parts bumps `session.history_revision` and stamps the rows with it; a delete also sets
`history_trimmed` (projector.py). `HistoryCache.fetch` reads those markers first, then only the rows
stamped after the revision its entry is current to (indexed), and merges them into that entry. It
reads everything from the boundary on again when the entry cannot be brought up to date: rows were
deleted (`history_trimmed` moved), the boundary moved, or the session is another one under the same id.

A session with an entry is read in one statement (`_CHANGES`): its markers and the rows stamped
after the entry's revision, from the entry's first message on. They merge in when the entry
continues (same session, nothing deleted, the same boundary, whose compaction part did not
change); otherwise the read starts over as above. A session without an entry that never compacted
is read whole in one statement too (`_FIRST`). That statement goes through `Readers.rows` (on
Postgres: the driver); a read starting over runs in one reader's transaction (`Readers.run`).

The markers are read from the database on every call, inside the read's transaction, so writes of
any process (replicas) are seen once they commit: an entry is only ever a starting point, never the
answer on its own word. Entries are replaced, never changed, so the reader threads share them with a
lock only around the lookup; bounded by sessions and rows, the least recently used go first. The
messages and parts handed out are shared with later reads: read-only (as `parsed.py`'s).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Connection,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    literal_column,
    null,
    select,
    union_all,
)

from agentforge.model.message import Message, WithParts
from agentforge.model.part import Part
from agentforge.store.parsed import SharedRows
from agentforge.store.queries import newest_boundary, start_at_boundary
from agentforge.store.readers import Readers, Values
from agentforge.store.schema import message, part, session

MAX_SESSIONS: Final = 256
MAX_ROWS: Final = 20_000
# Characters of row JSON merged into the entries (a row replaced counts again until its session is
# read whole once more): large parts must not pin unbounded memory.
MAX_CHARS: Final = 32 * 1024 * 1024

_Key = tuple[str, str]  # (tenant, session)
# (session.time_created, history_revision, history_trimmed): equal markers, equal history.
_Marks = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class _Entry:
    marks: _Marks
    boundary: str | None  # the newest compaction boundary when read
    since: str | None  # the first message id read (history_start); None: the whole session
    infos: dict[str, Message]
    parts: dict[str, dict[str, Part]]  # message id -> part id -> part, in part id order
    built: dict[str, WithParts]  # message id -> the message with its parts, in message id order
    rows: int
    chars: int

    @property
    def revision(self) -> int:
        return self.marks[1]


def _empty(boundary: str | None, since: str | None) -> _Entry:
    return _Entry((0, -1, 0), boundary, since, {}, {}, {}, 0, 0)


class HistoryCache:
    """The last history read of recently read sessions, keyed by (tenant, session)."""

    def __init__(
        self, *, max_sessions: int = MAX_SESSIONS, max_rows: int = MAX_ROWS, max_chars: int = MAX_CHARS
    ) -> None:
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._rows = 0
        self._chars = 0
        self._max_sessions = max_sessions
        self._max_rows = max_rows
        self._max_chars = max_chars
        self._lock = threading.Lock()  # the store's reader threads share one instance

    def __len__(self) -> int:
        return len(self._entries)

    async def fetch(
        self, readers: Readers, tenant_id: str, session_id: str, shared: SharedRows | None = None
    ) -> list[WithParts]:
        """What `queries.history_since_compaction` returns, reading only rows changed since the
        session's last read: mostly one statement (`Readers.rows`), merged where it is read."""
        known = self._get((tenant_id, session_id))
        params = _changes_params(tenant_id, session_id, known)

        def merge(changes: list[Values]) -> list[WithParts] | None:
            return self._merge(tenant_id, session_id, known, changes, shared)

        merged = await readers.rows(tenant_id, _FIRST if known is None else _CHANGES, params, merge)
        if merged is None:
            return await readers.run(self._read_whole, tenant_id, session_id, shared)
        return merged

    def read(
        self, conn: Connection, tenant_id: str, session_id: str, shared: SharedRows | None = None
    ) -> list[WithParts]:
        """`fetch` done on `conn` in the caller's transaction (the store's writer reads it this way
        right after its writes, `Store.history_after_writes`)."""
        known = self._get((tenant_id, session_id))
        params = _changes_params(tenant_id, session_id, known)
        changes = [tuple(row) for row in conn.execute(_FIRST if known is None else _CHANGES, params)]
        merged = self._merge(tenant_id, session_id, known, changes, shared)
        return self._read_whole(conn, tenant_id, session_id, shared) if merged is None else merged

    def _merge(
        self,
        tenant_id: str,
        session_id: str,
        known: _Entry | None,
        changes: Sequence[Values],
        shared: SharedRows | None,
    ) -> list[WithParts] | None:
        """The history from `_CHANGES`' rows merged into `known` (`_FIRST`'s: into nothing);
        None when they cannot be."""
        key = (tenant_id, session_id)
        found, messages, parts = _split(changes)
        if found is None:
            self._drop(key)
            return []
        marks, boundary = found
        if known is None:
            if boundary is not None:
                return None  # compacted: `_FIRST` read no rows
            known = _empty(None, None)
        elif known.marks == marks:
            return list(known.built.values())
        elif not _continues(known, marks, boundary) or (
            boundary is not None and any(row[1] == boundary for row in parts)
        ):
            return None  # the boundary's compaction part changed: where history starts may have too
        entry = _advance(known, marks, messages, parts, tenant_id, shared or SharedRows())
        self._put(key, entry)
        return list(entry.built.values())

    def _read_whole(
        self, conn: Connection, tenant_id: str, session_id: str, shared: SharedRows | None = None
    ) -> list[WithParts]:
        """The markers first, then the rows: those after the entry's revision when it continues,
        else every row from the boundary on."""
        key = (tenant_id, session_id)
        found = _marks(conn, tenant_id, session_id)
        if found is None:
            self._drop(key)
            return []
        marks, boundary = found
        known = self._get(key)
        if known is not None and known.marks == marks:
            return list(known.built.values())
        since = None if boundary is None else start_at_boundary(conn, tenant_id, boundary)
        if known is not None and _continues(known, marks, boundary) and known.since == since:
            base = known
        else:
            base = _empty(boundary, since)
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
            if entry.rows > self._max_rows or entry.chars > self._max_chars:
                return
            self._entries[key] = entry
            self._rows += entry.rows
            self._chars += entry.chars
            while (
                len(self._entries) > self._max_sessions
                or self._rows > self._max_rows
                or self._chars > self._max_chars
            ):
                _, oldest = self._entries.popitem(last=False)
                self._rows -= oldest.rows
                self._chars -= oldest.chars

    def _drop(self, key: _Key) -> None:
        with self._lock:
            self._forget(key)

    def _forget(self, key: _Key) -> None:
        gone = self._entries.pop(key, None)
        if gone is not None:
            self._rows -= gone.rows
            self._chars -= gone.chars


# Statements built once (bind parameters prefixed `b_`): building one per call cost more than running it.
# The markers, and the newest compaction boundary in the same round trip.
_MARKS = select(
    session.c.time_created,
    session.c.history_revision,
    session.c.history_trimmed,
    newest_boundary(session.c.tenant_id, session.c.id).scalar_subquery(),
).where(session.c.id == bindparam("b_session"), session.c.tenant_id == bindparam("b_tenant"))
# Rows from `b_since` on ("": all) stamped after `b_after` (ix_*_session_id_revision).
_MESSAGE_CHANGED = and_(
    message.c.tenant_id == bindparam("b_tenant"),
    message.c.session_id == bindparam("b_session"),
    message.c.revision > bindparam("b_after"),
    message.c.id >= bindparam("b_since"),
)
_PART_CHANGED = and_(
    part.c.tenant_id == bindparam("b_tenant"),
    part.c.session_id == bindparam("b_session"),
    part.c.revision > bindparam("b_after"),
    part.c.message_id >= bindparam("b_since"),
)
_MESSAGES_AFTER = select(message.c.id, message.c.data).where(_MESSAGE_CHANGED)
_PARTS_AFTER = select(part.c.id, part.c.message_id, part.c.data).where(_PART_CHANGED)


# A first read (nothing known yet): by message id from `b_since`, and the parts by message id, as
# `queries.history_since_compaction` reads; the revision index would walk the whole session.
_MESSAGES_FROM = select(message.c.id, message.c.data).where(
    message.c.tenant_id == bindparam("b_tenant"),
    message.c.session_id == bindparam("b_session"),
    message.c.id >= bindparam("b_since"),
)
_PARTS_OF = select(part.c.id, part.c.message_id, part.c.data).where(
    part.c.tenant_id == bindparam("b_tenant"), part.c.message_id.in_(bindparam("b_ids", expanding=True))
)


# One statement: the markers (kind 0) and the rows `_MESSAGES_AFTER` (kind 1) and `_PARTS_AFTER`
# (kind 2) read, as (kind, id, message id, data, *markers, boundary); the rows only where `only`.
_NO_TEXT = cast(null(), Text)
_NO_NUMBER = cast(null(), BigInteger)


def _changes(*only: ColumnElement[bool]) -> CompoundSelect[Any]:
    nothing = (_NO_NUMBER, _NO_NUMBER, _NO_NUMBER, _NO_TEXT)
    return union_all(
        select(literal_column("0"), _NO_TEXT, _NO_TEXT, _NO_TEXT, *_MARKS.selected_columns).where(
            session.c.id == bindparam("b_session"), session.c.tenant_id == bindparam("b_tenant")
        ),
        select(literal_column("1"), message.c.id, _NO_TEXT, message.c.data, *nothing).where(
            _MESSAGE_CHANGED, *only
        ),
        select(literal_column("2"), part.c.id, part.c.message_id, part.c.data, *nothing).where(
            _PART_CHANGED, *only
        ),
    )


# A session with an entry: what changed since.
_CHANGES = _changes()
# A session without one: every row (`b_after` -1, `b_since` ""), unless it ever compacted (then
# the markers alone, and `_read_whole` reads it from its boundary).
_FIRST = _changes(~newest_boundary(bindparam("b_tenant"), bindparam("b_session")).exists())


def _changes_params(tenant_id: str, session_id: str, known: _Entry | None) -> dict[str, Any]:
    after, since = (-1, "") if known is None else (known.revision, known.since or "")
    return {"b_tenant": tenant_id, "b_session": session_id, "b_after": after, "b_since": since}


def _split(changes: Sequence[Values]) -> tuple[tuple[_Marks, str | None] | None, list[Values], list[Values]]:
    """`_CHANGES`' rows: (the markers and boundary, or None: no such session), messages, parts."""
    found: tuple[_Marks, str | None] | None = None
    messages: list[Values] = []
    parts: list[Values] = []
    for row in changes:
        kind = int(row[0])
        if kind == 0:
            found = ((row[4], row[5], row[6]), row[7])
        elif kind == 1:
            messages.append((row[1], row[3]))
        else:
            parts.append((row[1], row[2], row[3]))
    return found, messages, parts


def _marks(conn: Connection, tenant_id: str, session_id: str) -> tuple[_Marks, str | None] | None:
    row = conn.execute(_MARKS, {"b_session": session_id, "b_tenant": tenant_id}).one_or_none()
    return None if row is None else ((row[0], row[1], row[2]), row[3])


def _continues(known: _Entry, marks: _Marks, boundary: str | None) -> bool:
    """Whether rows newer than `known` may be all that changed: same session, nothing deleted, the
    same boundary, and not older than the database (a rolled-back bump may reuse a revision)."""
    created, revision, trimmed = marks
    return (
        known.marks[0] == created
        and known.marks[2] == trimmed
        and known.boundary == boundary
        and known.revision <= revision
    )


def _changed_rows(
    conn: Connection, tenant_id: str, session_id: str, since: str | None, after: int
) -> tuple[list[Values], list[Values]]:
    """The session's message and part rows from `since` on, stamped with a revision above `after`."""
    params = {"b_tenant": tenant_id, "b_session": session_id, "b_after": after, "b_since": since or ""}
    if after >= 0:
        return _values(conn, _MESSAGES_AFTER, params), _values(conn, _PARTS_AFTER, params)
    messages = _values(conn, _MESSAGES_FROM, params)
    if not messages:
        return [], []
    ids = [row[0] for row in messages]
    return messages, _values(conn, _PARTS_OF, {"b_tenant": tenant_id, "b_ids": ids})


def _values(conn: Connection, statement: Select[Any], params: dict[str, Any]) -> list[Values]:
    return [tuple(row) for row in conn.execute(statement, params)]


def _advance(
    base: _Entry,
    marks: _Marks,
    message_rows: Iterable[Values],
    part_rows: Iterable[Values],
    tenant_id: str,
    shared: SharedRows,
) -> _Entry:
    """A new entry: `base` with the changed rows, (id, data) and (id, message id, data), merged in
    (`base` itself is left as it was)."""
    infos = dict(base.infos)
    changed: set[str] = set()
    chars = base.chars
    for message_id, data in message_rows:
        infos[message_id] = shared.message(tenant_id, message_id, data)
        changed.add(message_id)
        chars += len(data)
    touched: dict[str, dict[str, Part]] = {}
    for part_id, message_id, data in part_rows:
        group = touched.get(message_id)
        if group is None:
            group = touched[message_id] = dict(base.parts.get(message_id, {}))
        group[part_id] = shared.part(tenant_id, part_id, data)
        chars += len(data)
    parts = dict(base.parts)
    rows = base.rows + len(infos) - len(base.infos)
    for message_id, group in touched.items():
        rows += len(group) - len(parts.get(message_id, ()))
        parts[message_id] = dict(sorted(group.items()))
        changed.add(message_id)
    built = _in_order(base.built, infos, parts, changed)
    return _Entry(marks, base.boundary, base.since, infos, parts, built, rows, chars)


def _in_order(
    known: dict[str, WithParts],
    infos: dict[str, Message],
    parts: dict[str, dict[str, Part]],
    changed: set[str],
) -> dict[str, WithParts]:
    """Every message with its parts, in id order, reusing the unchanged ones' objects."""

    def with_parts(message_id: str) -> WithParts:
        return WithParts.model_construct(
            info=infos[message_id], parts=list(parts.get(message_id, {}).values())
        )

    new = sorted(message_id for message_id in changed if message_id in infos and message_id not in known)
    last = next(reversed(known), None)
    if last is not None and new and new[0] < last:
        # A message older than the newest known (a client may choose a user message's id): re-sort.
        return {
            message_id: _reuse(known, message_id, changed) or with_parts(message_id)
            for message_id in sorted(infos)
        }
    built = dict(known)
    for message_id in changed:
        if message_id in known:
            built[message_id] = with_parts(message_id)
    for message_id in new:
        built[message_id] = with_parts(message_id)
    return built


def _reuse(known: dict[str, WithParts], message_id: str, changed: set[str]) -> WithParts | None:
    return None if message_id in changed else known.get(message_id)
