"""Read queries, written once as sync functions over a `Connection` (both dialects run them).

Every function takes `tenant_id` and only ever sees that tenant's rows, except the start-up
maintenance query `open_assistant_messages`, which spans all tenants and says whose each row is.
"""

from __future__ import annotations

import base64
import binascii
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias

import orjson
from sqlalchemy import ColumnElement, Connection, Row, Select, and_, bindparam, func, or_, select

from agentforge.model.events import Event
from agentforge.model.message import Message, WithParts, message_adapter, part_adapter
from agentforge.model.part import CompactionPart, Part
from agentforge.model.permission import PermissionRequestInfo
from agentforge.model.session import Session
from agentforge.store.parsed import SharedRows
from agentforge.store.schema import (
    HAS_COMPACTION_BOUNDARY,
    OPEN_ASSISTANT_MESSAGE,
    event,
    message,
    part,
    session,
    todo,
)
from agentforge.store.schema import permission_request as permission_request_table

# A row of any shape (SQLAlchemy 2.1 types rows by their column tuple).
AnyRow: TypeAlias = Row[*tuple[Any, ...]]

_SESSION_COLUMNS = (
    session.c.data,
    session.c.cost,
    session.c.tokens_input,
    session.c.tokens_output,
    session.c.tokens_reasoning,
    session.c.tokens_cache_read,
    session.c.tokens_cache_write,
)


# --- sessions ---------------------------------------------------------------------------------------

# One session by id, built once (read before every prompt, through `Readers.rows`): `session_params`.
SESSION_BY_ID = select(*_SESSION_COLUMNS).where(
    session.c.id == bindparam("b_session"), session.c.tenant_id == bindparam("b_tenant")
)


def session_params(tenant_id: str, session_id: str) -> dict[str, str]:
    return {"b_session": session_id, "b_tenant": tenant_id}


def session_from_rows(rows: Sequence[Sequence[Any]]) -> Session | None:
    """The session of `SESSION_BY_ID`'s rows, or None."""
    return _session_from_row(rows[0]) if rows else None


def list_sessions(
    conn: Connection,
    tenant_id: str,
    *,
    directory: str | None = None,
    roots: bool = False,
    start: int | None = None,
    search: str | None = None,
    limit: int | None = None,
) -> list[Session]:
    """Newest `time.updated` first. `start`: updated at or after (ms); `search`: title substring, any case."""
    query = select(*_SESSION_COLUMNS).where(session.c.tenant_id == tenant_id)
    if directory is not None:
        query = query.where(session.c.directory == directory)
    if roots:
        query = query.where(session.c.parent_id.is_(None))
    if start is not None:
        query = query.where(session.c.time_updated >= start)
    if search:
        query = query.where(session.c.title.icontains(search, autoescape=True))
    # Session ids sort newest first, so they break ties within one millisecond the same way.
    query = query.order_by(session.c.time_updated.desc(), session.c.id)
    if limit is not None:
        query = query.limit(limit)
    return [_session_from_row(row) for row in conn.execute(query)]


def children(conn: Connection, tenant_id: str, session_id: str) -> list[Session]:
    """Sessions whose parent is `session_id` (subagent sessions), newest `time.updated` first."""
    query = (
        select(*_SESSION_COLUMNS)
        .where(session.c.parent_id == session_id, session.c.tenant_id == tenant_id)
        .order_by(session.c.time_updated.desc(), session.c.id)
    )
    return [_session_from_row(row) for row in conn.execute(query)]


def _session_from_row(row: Sequence[Any]) -> Session:
    """A row of `_SESSION_COLUMNS`, by position (a SQLAlchemy row or an asyncpg record)."""
    # The stored `info` keeps whatever totals its writer sent; the projector's running totals win.
    data, cost, tokens_input, tokens_output, tokens_reasoning, cache_read, cache_write = row
    parsed = orjson.loads(data)
    parsed["cost"] = cost
    parsed["tokens"] = {
        "input": tokens_input,
        "output": tokens_output,
        "reasoning": tokens_reasoning,
        "cache": {"read": cache_read, "write": cache_write},
    }
    return Session.model_validate(parsed)


# --- messages and parts -----------------------------------------------------------------------------


def get_message(conn: Connection, tenant_id: str, session_id: str, message_id: str) -> WithParts | None:
    row = conn.execute(
        select(message.c.id, message.c.data).where(
            message.c.id == message_id,
            message.c.session_id == session_id,
            message.c.tenant_id == tenant_id,
        )
    ).one_or_none()
    if row is None:
        return None
    parts = _parts_by_message(
        conn.execute(
            select(part.c.id, part.c.message_id, part.c.data)
            .where(part.c.message_id == message_id, part.c.tenant_id == tenant_id)
            .order_by(part.c.id)
        ),
        tenant_id,
    )
    return _with_parts(row, parts.get(message_id, []), tenant_id)


def list_messages(
    conn: Connection,
    tenant_id: str,
    session_id: str,
    *,
    limit: int | None = None,
    before: str | None = None,
) -> tuple[list[WithParts], str | None]:
    """Oldest first. With `limit`: the newest `limit` messages older than the `before` cursor, and the
    cursor of the next (older) page, or None when there is none. Raises ValueError("Invalid cursor")."""
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
    if limit == 0:
        return [], None  # no page, and no message to anchor a cursor on
    query = select(message.c.id, message.c.time_created, message.c.data).where(
        message.c.session_id == session_id, message.c.tenant_id == tenant_id
    )
    if before is not None:
        cursor_id, cursor_time = decode_cursor(before)
        query = query.where(
            or_(
                message.c.time_created < cursor_time,
                and_(message.c.time_created == cursor_time, message.c.id < cursor_id),
            )
        )
    query = query.order_by(message.c.time_created.desc(), message.c.id.desc())
    if limit is not None:
        # One extra row says whether an older page exists.
        query = query.limit(limit + 1)
    rows = list(conn.execute(query))
    next_cursor = None
    if limit is not None and len(rows) > limit:
        rows = rows[:limit]
        oldest = rows[-1]
        next_cursor = encode_cursor(oldest.id, oldest.time_created)
    rows.reverse()
    return _attach_parts(conn, tenant_id, rows), next_cursor


def history(
    conn: Connection,
    tenant_id: str,
    session_id: str,
    *,
    since_message_id: str | None = None,
    shared: SharedRows | None = None,
) -> list[WithParts]:
    """All messages (from `since_message_id` on, inclusive) oldest first, with their parts.

    Message ids ascend in creation order, so "from that message on" is an id range: one indexed query
    for the messages and one for their parts. `shared`: reuse (and hand out) the parsed objects of
    earlier reads, read-only (store/parsed.py).
    """
    messages = select(message.c.id, message.c.data).where(
        message.c.session_id == session_id, message.c.tenant_id == tenant_id
    )
    parts = select(part.c.id, part.c.message_id, part.c.data).where(
        part.c.session_id == session_id, part.c.tenant_id == tenant_id
    )
    if since_message_id is not None:
        messages = messages.where(message.c.id >= since_message_id)
        parts = parts.where(part.c.message_id >= since_message_id)
    message_rows = list(conn.execute(messages.order_by(message.c.id)))
    by_message = _parts_by_message(conn.execute(parts.order_by(part.c.id)), tenant_id, shared)
    return [_with_parts(row, by_message.get(row.id, []), tenant_id, shared) for row in message_rows]


def history_since_compaction(
    conn: Connection, tenant_id: str, session_id: str, shared: SharedRows | None = None
) -> list[WithParts]:
    """The messages the loop needs: from the newest completed compaction on (its preserved tail
    included), oldest first; the whole session when it never compacted. `shared`: as in `history`.

    `filter_compacted` over this gives exactly what it gives over the whole session: the walk from
    the newest message stops at the newest compaction whose summary completed, and every completed
    summary is newer than its compaction message. Every read is indexed and touches only rows from
    the boundary on, so the cost does not grow with what lies before it.
    """
    since = history_start(conn, tenant_id, session_id)
    if since is None:
        return history(conn, tenant_id, session_id, shared=shared)
    rows = list(
        conn.execute(
            select(message.c.id, message.c.data)
            .where(
                message.c.session_id == session_id, message.c.tenant_id == tenant_id, message.c.id >= since
            )
            .order_by(message.c.id)
        )
    )
    # Parts by message id (ix_part_message_id_id), not by a part-id range over the whole session.
    return _attach_parts(conn, tenant_id, rows, shared)


def history_start(conn: Connection, tenant_id: str, session_id: str) -> str | None:
    """The id of the first message `history_since_compaction` reads: the newest completed compaction
    or the start of the tail it preserved; None when the session never compacted."""
    boundary = conn.execute(newest_boundary(tenant_id, session_id)).scalar_one_or_none()
    return None if boundary is None else start_at_boundary(conn, tenant_id, boundary)


def newest_boundary(tenant_id: str | ColumnElement[str], session_id: str | ColumnElement[str]) -> Select[str]:
    """The session's newest compaction boundary (ix_message_compaction_boundary); the arguments may be
    columns of an enclosing query, to read it as a scalar subquery."""
    return (
        select(message.c.compaction_boundary)
        .where(message.c.session_id == session_id, HAS_COMPACTION_BOUNDARY, message.c.tenant_id == tenant_id)
        .order_by(message.c.compaction_boundary.desc())
        .limit(1)
    )


def start_at_boundary(conn: Connection, tenant_id: str, boundary: str) -> str:
    """Where history starts given the newest boundary: there, or at the tail its compaction kept."""
    since = boundary
    for row in conn.execute(
        select(part.c.data).where(part.c.message_id == boundary, part.c.tenant_id == tenant_id)
    ):
        found = _parse_part(row.data)
        if isinstance(found, CompactionPart) and found.tail_start_id:
            since = min(since, found.tail_start_id)
    return since


def get_part(conn: Connection, tenant_id: str, session_id: str, message_id: str, part_id: str) -> Part | None:
    data = conn.execute(
        select(part.c.data).where(
            part.c.id == part_id,
            part.c.message_id == message_id,
            part.c.session_id == session_id,
            part.c.tenant_id == tenant_id,
        )
    ).scalar_one_or_none()
    return None if data is None else _parse_part(data)


def open_assistant_messages(conn: Connection, limit: int = 1000) -> list[tuple[str, WithParts]]:
    """Assistant messages not yet completed, of every tenant, oldest first, as (tenant_id, message).

    Served by the partial index `ix_message_open_assistant`: cheap however long the history is.
    """
    rows = list(
        conn.execute(
            select(message.c.id, message.c.tenant_id, message.c.data)
            .where(OPEN_ASSISTANT_MESSAGE)
            .order_by(message.c.id)
            .limit(limit)
        )
    )
    if not rows:
        return []
    parts = conn.execute(
        select(part.c.tenant_id, part.c.message_id, part.c.data)
        .where(part.c.message_id.in_([row.id for row in rows]))
        .order_by(part.c.id)
    )
    by_message: defaultdict[tuple[str, str], list[Part]] = defaultdict(list)
    for row in parts:
        by_message[(row.tenant_id, row.message_id)].append(_parse_part(row.data))
    return [
        (row.tenant_id, _with_parts(row, by_message.get((row.tenant_id, row.id), []), row.tenant_id))
        for row in rows
    ]


def open_turn_sessions(conn: Connection, limit: int = 1000) -> list[str]:
    """The sessions of `open_assistant_messages`' messages (the same partial index), without
    reading or parsing the messages and parts: what the failover pass checks every second."""
    rows = conn.execute(
        select(message.c.session_id).where(OPEN_ASSISTANT_MESSAGE).order_by(message.c.id).limit(limit)
    )
    return list(dict.fromkeys(row.session_id for row in rows))


def _attach_parts(
    conn: Connection, tenant_id: str, message_rows: Sequence[AnyRow], shared: SharedRows | None = None
) -> list[WithParts]:
    """One query for the parts of all the given messages."""
    if not message_rows:
        return []
    ids = [row.id for row in message_rows]
    by_message = _parts_by_message(
        conn.execute(
            select(part.c.id, part.c.message_id, part.c.data)
            .where(part.c.message_id.in_(ids), part.c.tenant_id == tenant_id)
            .order_by(part.c.id)
        ),
        tenant_id,
        shared,
    )
    return [_with_parts(row, by_message.get(row.id, []), tenant_id, shared) for row in message_rows]


def _parts_by_message(
    rows: Iterable[AnyRow], tenant_id: str, shared: SharedRows | None = None
) -> dict[str, list[Part]]:
    """Group (id, message_id, data) rows, keeping their order (callers order by part id)."""
    grouped: defaultdict[str, list[Part]] = defaultdict(list)
    for row in rows:
        parsed = _parse_part(row.data) if shared is None else shared.part(tenant_id, row.id, row.data)
        grouped[row.message_id].append(parsed)
    return grouped


def _with_parts(
    row: AnyRow, parts: list[Part], tenant_id: str, shared: SharedRows | None = None
) -> WithParts:
    """A message (an (id, data) row) with its parsed parts; built without validating them again."""
    if shared is None:
        info: Message = message_adapter.validate_json(row.data)
    else:
        info = shared.message(tenant_id, row.id, row.data)
    return WithParts.model_construct(info=info, parts=parts)


def _parse_part(data: str) -> Part:
    parsed: Part = part_adapter.validate_json(data)
    return parsed


# --- pagination cursor ------------------------------------------------------------------------------


def encode_cursor(message_id: str, time_created: int) -> str:
    """base64url (unpadded) of JSON `{id, time}` (KERNEL 3.6)."""
    raw = orjson.dumps({"id": message_id, "time": time_created})
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(cursor: str) -> tuple[str, int]:
    try:
        # validate=True: the lenient decoder would silently skip characters outside the alphabet.
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        value = orjson.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("Invalid cursor") from exc
    if not isinstance(value, dict):
        raise ValueError("Invalid cursor")
    message_id, time_created = value.get("id"), value.get("time")
    if not isinstance(message_id, str) or type(time_created) is not int:
        raise ValueError("Invalid cursor")
    return message_id, time_created


# --- event log --------------------------------------------------------------------------------------


_EVENT_COLUMNS = (event.c.id, event.c.type, event.c.data, event.c.seq, event.c.position, event.c.session_id)
# A session's events after a seq, built once: another replica's announced events are read back by
# this (through `Readers.rows`), as `events_after` with a session and no `up_to_position`.
SESSION_EVENTS_AFTER = (
    select(*_EVENT_COLUMNS)
    .where(
        event.c.tenant_id == bindparam("b_tenant"),
        event.c.session_id == bindparam("b_session"),
        event.c.seq > bindparam("b_after"),
    )
    .order_by(event.c.seq)
    .limit(bindparam("b_limit"))
)


def session_events_params(tenant_id: str, session_id: str, after: int, limit: int) -> dict[str, Any]:
    return {"b_tenant": tenant_id, "b_session": session_id, "b_after": after, "b_limit": limit}


def events_from_rows(tenant_id: str) -> Callable[[Sequence[Sequence[Any]]], list[Event]]:
    """The events of rows of `_EVENT_COLUMNS` (by position), of `tenant_id`."""

    def build(rows: Sequence[Sequence[Any]]) -> list[Event]:
        return [
            Event(
                type=kind,
                properties=orjson.loads(data),
                session_id=session_id,
                tenant_id=tenant_id,
                seq=seq,
                id=event_id,
                position=position,
            )
            for event_id, kind, data, seq, position, session_id in rows
        ]

    return build


def events_after(
    conn: Connection,
    tenant_id: str,
    session_id: str | None,
    after: int,
    limit: int = 1000,
    up_to_position: int | None = None,
) -> list[Event]:
    """One page of the event log after a resume point, oldest first.

    With a session: its events with `seq > after`; without: the tenant's with `position > after`.
    `up_to_position` stops the page at a tenant position (where a live subscription took over).
    """
    key = event.c.position if session_id is None else event.c.seq
    query = select(*_EVENT_COLUMNS).where(event.c.tenant_id == tenant_id, key > after)
    if session_id is not None:
        query = query.where(event.c.session_id == session_id)
    if up_to_position is not None:
        query = query.where(event.c.position <= up_to_position)
    return events_from_rows(tenant_id)(list(conn.execute(query.order_by(key).limit(limit))))


def last_seq(conn: Connection, tenant_id: str, session_id: str) -> int:
    """The session's highest committed seq, 0 when it has none."""
    value = conn.execute(
        select(func.max(event.c.seq)).where(event.c.session_id == session_id, event.c.tenant_id == tenant_id)
    ).scalar()
    return int(value or 0)


def log_span(
    conn: Connection, tenant_id: str, session_id: str | None, up_to_position: int | None = None
) -> tuple[int, int]:
    """(first, last) resume key the log holds: seqs of a session, or positions of the tenant; (0, 0)
    when it holds none. `last` counts only events up to `up_to_position` when given."""
    key = event.c.position if session_id is None else event.c.seq
    where = [event.c.tenant_id == tenant_id]
    if session_id is not None:
        where.append(event.c.session_id == session_id)
    first = conn.execute(select(func.min(key)).where(*where)).scalar()
    if up_to_position is not None:
        where.append(event.c.position <= up_to_position)
    last = conn.execute(select(func.max(key)).where(*where)).scalar()
    return int(first or 0), int(last or 0)


# --- interaction records: permission requests and todo lists ----------------------------------------


def permission_request(conn: Connection, tenant_id: str, request_id: str) -> PermissionRequestInfo | None:
    row = conn.execute(
        select(permission_request_table).where(
            permission_request_table.c.id == request_id, permission_request_table.c.tenant_id == tenant_id
        )
    ).one_or_none()
    return None if row is None else _permission_from_row(row)


def permission_requests(
    conn: Connection, tenant_id: str, session_id: str, *, decision: str | None = None
) -> list[PermissionRequestInfo]:
    """The session's requests oldest first, optionally only those with one decision."""
    table = permission_request_table
    query = select(table).where(table.c.session_id == session_id, table.c.tenant_id == tenant_id)
    if decision is not None:
        query = query.where(table.c.decision == decision)
    return [_permission_from_row(row) for row in conn.execute(query.order_by(table.c.id))]


def pending_permission_requests(conn: Connection, limit: int) -> list[tuple[str, PermissionRequestInfo]]:
    """(tenant_id, request) of every undecided request, across tenants: a start-up maintenance read."""
    table = permission_request_table
    query = select(table).where(table.c.status == "pending").order_by(table.c.id).limit(limit)
    return [(row.tenant_id, _permission_from_row(row)) for row in conn.execute(query)]


def tenant_pending_permission_requests(
    conn: Connection, tenant_id: str, limit: int
) -> list[PermissionRequestInfo]:
    """The tenant's undecided requests oldest first, whichever process waits on them (replicas)."""
    table = permission_request_table
    query = (
        select(table)
        .where(table.c.tenant_id == tenant_id, table.c.status == "pending")
        .order_by(table.c.id)
        .limit(limit)
    )
    return [_permission_from_row(row) for row in conn.execute(query)]


def _permission_from_row(row: AnyRow) -> PermissionRequestInfo:
    tool = None
    if row.message_id is not None and row.call_id is not None:
        tool = {"messageID": row.message_id, "callID": row.call_id}
    return PermissionRequestInfo.model_validate(
        {
            "id": row.id,
            "sessionID": row.session_id,
            "permission": row.permission,
            "patterns": orjson.loads(row.patterns),
            "always": orjson.loads(row.always),
            "metadata": orjson.loads(row.metadata),
            "tool": tool,
            "time": {"created": row.time_created, "deadline": row.deadline, "decided": row.time_decided},
            "status": row.status,
            "decision": row.decision,
            "decidedBy": row.decided_by,
            "feedback": row.feedback,
        }
    )


def todos(conn: Connection, tenant_id: str, session_id: str) -> list[dict[str, Any]]:
    """The session's todo list as last written (empty when it never had one)."""
    data = conn.execute(
        select(todo.c.data).where(todo.c.session_id == session_id, todo.c.tenant_id == tenant_id)
    ).scalar_one_or_none()
    if data is None:
        return []
    loaded: list[dict[str, Any]] = orjson.loads(data)
    return loaded
