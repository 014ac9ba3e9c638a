"""The projector (KERNEL 2.2): applies one durable event to the session, message and part rows.

Written once as sync code over a SQLAlchemy `Connection` (wrapped in `Writes`): the SQLite writer
thread calls it directly, the Postgres writer through `AsyncConnection.run_sync`. The caller owns the
transaction and appends the event to the log; the projector only touches the projected rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson
from sqlalchemy import (
    ColumnElement,
    Connection,
    CursorResult,
    Delete,
    Executable,
    Insert,
    Select,
    Table,
    Update,
    bindparam,
    delete,
    select,
    update,
)

from agentforge.model import events as ev
from agentforge.model.events import Event
from agentforge.store.conflicts import conflict_insert
from agentforge.store.direct import NEW, ExpectedRow, Once, Run, execute_rows, execute_runs, reads_rows
from agentforge.store.last_written import LastWritten
from agentforge.store.schema import message, part, permission_request, session, todo
from agentforge.store.usage import NO_USAGE, STEP_FINISH, Usage, usage_of


class MissingRowError(LookupError):
    """The event targets a row that is not there (typically a late write after a delete)."""


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


class StaleRevisionError(MissingRowError):
    """A session's history revision moved (or the session went) behind the writer's known value."""


RevisionKey = tuple[str, str]  # (tenant, session)


class KnownRevisions(Protocol):
    """The last committed history revision of sessions (batch.py keeps them for a sole writer)."""

    def get(self, key: RevisionKey) -> int | None: ...

    def forget(self, key: RevisionKey) -> None: ...


Replaced = Callable[[str | None], None]  # handed the data of the row an upsert replaced


class Writes:
    """The projector's statements for one transaction, run in order.

    Consecutive executions of the same statement are sent as one `executemany`: a batch of part
    updates costs one SQLAlchemy execution instead of one each (~40 us apiece), and on Postgres one
    pipelined round trip; on Postgres consecutive INSERTs into different tables (messages, parts,
    the event log, audit rows) go as one statement (`direct.execute_runs`). A statement whose result
    is needed (`run`) first sends what is pending, so reads see every earlier write. Constraint
    errors of deferred statements surface at `flush`.
    """

    def __init__(
        self, conn: Connection, known: KnownRevisions | None = None, written: LastWritten | None = None
    ) -> None:
        """`known`: the sessions' last committed history revisions, when this writer is the database's
        only one (SQLite): a session found there is bumped without a statement of its own (below).
        `written`: what the writer last wrote of the tool parts under way (Postgres)."""
        self.conn = conn
        self.written = written
        # Set while writing an event group (batch.py): its message and parts are new rows, inserted
        # at once, so an id any row holds fails instead of overwriting it or being silently left out.
        self.strict = False
        # With `strict`: whether each of those INSERTs is sent at once, so that its failure names
        # its event. Unset (a transaction redone item by item when anything in it fails, where
        # the failure is named), they are deferred like other rows.
        self.at_once = True
        self._runs: list[Run] = []  # deferred rows, per statement, in order
        self._known = known
        # (tenant, session) -> the history revision this transaction stamps that session's rows with.
        self.revisions: dict[RevisionKey, int] = {}
        # The bumps taken from `known`, not yet written: one executemany for all of them at `finish`.
        self._bumps: dict[RevisionKey, int] = {}
        self._created: dict[RevisionKey, int] = {}  # sessions this transaction creates: revision 0
        # Sessions deleted, or written outside these writes: their revision may have moved unseen.
        self.forgotten: set[RevisionKey] = set()
        # Part id -> who wants the data of the row its next upsert replaces (`replaced_by`).
        self._replaced: dict[str, Callable[[str | None], None]] = {}

    def replaced_by(self, part_id: str, callback: Callable[[str | None], None]) -> bool:
        """Have the next upsert of the part read the data of the row it replaces (None: there was
        none) in its own statement, and hand it to `callback` right after it; or, where the writer
        holds its message and knows what the row should be (`LastWritten`), hand it that, checked
        in the same statement (`direct.Run.replaced`: `callback` must only add work to the
        transaction). Only on Postgres outside a group (elsewhere a read of its own costs no round
        trip, or the part is new): False, and the caller reads the row itself."""
        if self.strict or self.conn.dialect.name != "postgresql":
            return False
        self._replaced[part_id] = callback
        return True

    def take_replaced(self, part_id: str) -> Callable[[str | None], None] | None:
        """Who wants the row the part's upsert replaces (`replaced_by`), once."""
        return None if self.strict else self._replaced.pop(part_id, None)

    def revision(self, tenant_id: str, session_id: str) -> int:
        """The revision to stamp a message or part of the session with: the session's counter, bumped
        once per transaction (writes through one `Writes` are one transaction or one savepoint).

        A session whose last revision is known is bumped at `finish`, all such sessions in one
        statement that also checks the revision it moves from: a known value that is stale (or a
        session gone) fails the transaction there, never stamps rows with a revision read before."""
        key = (tenant_id, session_id)
        found = self.revisions.get(key)
        if found is None:
            last = None if self._known is None else self._known.get(key)
            if last is None:
                self.flush()
                found = bump_history(self.conn, tenant_id, session_id)
                if found is None:
                    raise MissingRowError(f"session {session_id} does not exist")
            else:
                found = self._bumps[key] = last + 1
            self.revisions[key] = found
        return found

    def trim(self, tenant_id: str, session_id: str) -> None:
        """Note a delete of the session's messages or parts, so readers of its history start over."""
        self.finish()
        found = bump_history(self.conn, tenant_id, session_id, trim=True)
        if found is not None:
            self.revisions[(tenant_id, session_id)] = found

    def forget(self, tenant_id: str, session_id: str) -> None:
        """The session is deleted (or written outside these writes): its revision is read again."""
        key = (tenant_id, session_id)
        self.forgotten.add(key)
        self.revisions.pop(key, None)
        self._bumps.pop(key, None)
        self._created.pop(key, None)
        if self._known is not None:
            self._known.forget(key)

    def created(self, tenant_id: str, session_id: str) -> None:
        self._created[(tenant_id, session_id)] = 0

    def committed(self) -> dict[RevisionKey, int]:
        """What the written sessions' revisions are once this transaction commits."""
        return {**self._created, **self.revisions}

    def finish(self) -> None:
        """Send what is pending, then the bumps taken from the known revisions."""
        self.flush()
        if not self._bumps:
            return
        rows = [
            {"b_tenant_id": tenant_id, "b_id": session_id, "b_from": revision - 1, "b_to": revision}
            for (tenant_id, session_id), revision in self._bumps.items()
        ]
        self._bumps = {}
        if execute_rows(self.conn, _SET_HISTORY, rows) != len(rows):
            raise StaleRevisionError("a session's history revision is not the one this writer knew")

    def defer(self, statement: Executable, row: dict[str, Any], once: Once | None = None) -> None:
        """Execute later, in order (`once`: see `direct.Run`)."""
        self.defer_rows(statement, [row], once)

    def defer_rows(self, statement: Executable, rows: list[dict[str, Any]], once: Once | None = None) -> None:
        last = self._runs[-1] if self._runs else None
        if (
            last is not None
            and last.statement is statement
            and last.counted is None
            and last.replaced is None
        ):
            last.rows.extend(rows)
        elif rows and not (once is not None and self._fold(statement, rows, once)):
            self._runs.append(Run(statement, list(rows), once))

    def _fold(self, statement: Executable, rows: list[dict[str, Any]], once: Once) -> bool:
        """Fold upserted rows into an earlier pending run of the same upsert that writes each of
        their ids already (`once` merges them), when nothing between the two could tell the
        difference: no statement on the same table, and no DELETE (it may cascade to it). A message
        created and finished in one batch (a fast reply) is then one statement on Postgres where it
        was two round trips. Whether the rows fold: False, they go in a run of their own."""
        table = _table_of(statement)
        if table is None:
            return False
        for run in reversed(self._runs):
            if run.statement is statement:
                if run.once is not once or run.counted is not None or run.replaced is not None:
                    return False
                if not {row["id"] for row in rows} <= {row["id"] for row in run.rows}:
                    return False
                folded = once(run.rows + rows)
                if folded is None:
                    return False
                run.rows = folded
                return True
            if _table_of(run.statement) in (None, table):  # this table, or a DELETE (it may cascade)
                return False
        return False

    def expect_row(self, statement: Executable, row: dict[str, Any], missing: str) -> None:
        """Execute later, in order; MissingRowError(`missing`) when it changed no row."""

        def counted(changed: int) -> None:
            if changed == 0:
                raise MissingRowError(missing)

        self._runs.append(Run(statement, [row], counted=counted))

    def defer_replacing(
        self,
        statement: Executable,
        row: dict[str, Any],
        replaced: Replaced,
        expected: ExpectedRow | None = None,
    ) -> None:
        """Execute later, in order, handing `replaced` the data of the row it replaces (None: a new
        row) once it has run, or `expected`'s once it is held; only where `direct.reads_rows` says
        so (`direct.Run.expected`)."""
        self._runs.append(Run(statement, [row], replaced=replaced, expected=expected))

    def insert(self, statement: Executable, row: dict[str, Any]) -> None:
        """A strict INSERT: sent at once, or deferred (`at_once`)."""
        if self.at_once:
            self.count(statement, row)
        else:
            self.defer(statement, row)

    def run(self, statement: Executable, params: dict[str, Any]) -> CursorResult[*tuple[Any, ...]]:
        """Execute now (after what is pending) and return the result."""
        self.flush()
        return self.conn.execute(statement, params)

    def count(self, statement: Executable, params: dict[str, Any]) -> int:
        """Execute now (after what is pending); the number of rows it changed."""
        self.flush()
        return execute_rows(self.conn, statement, [params])

    def flush(self) -> None:
        # What a run hands back may defer more (a replaced step-finish part's usage taken back).
        while self._runs:
            runs, self._runs = self._runs, []
            execute_runs(self.conn, runs)


def _table_of(statement: Executable) -> str | None:
    """The table an INSERT or UPDATE writes (None: another kind of statement, a DELETE among them)."""
    if isinstance(statement, Insert | Update):
        name = getattr(statement.table, "name", None)
        return name if isinstance(name, str) else None
    return None


_BUMP_HISTORY: Update = (
    update(session)
    .where(session.c.id == bindparam("b_id"), session.c.tenant_id == bindparam("b_tenant_id"))
    .values(history_revision=session.c.history_revision + 1)
    .returning(session.c.history_revision)
)
# A bump of a session whose revision the writer knows (`Writes.finish`): no RETURNING, and no row
# unless the revision is still the known one.
_SET_HISTORY: Update = (
    update(session)
    .where(
        session.c.id == bindparam("b_id"),
        session.c.tenant_id == bindparam("b_tenant_id"),
        session.c.history_revision == bindparam("b_from"),
    )
    .values(history_revision=bindparam("b_to"))
)
_BUMP_AND_TRIM_HISTORY: Update = (
    update(session)
    .where(session.c.id == bindparam("b_id"), session.c.tenant_id == bindparam("b_tenant_id"))
    .values(
        history_revision=session.c.history_revision + 1,
        history_trimmed=session.c.history_revision + 1,
    )
    .returning(session.c.history_revision)
)


def bump_history(conn: Connection, tenant_id: str, session_id: str, *, trim: bool = False) -> int | None:
    """Advance the session's history revision (and with `trim`, mark a delete at it); the new value,
    or None when the session is not there. The row lock this takes orders concurrent writers (other
    replicas) so that a revision commits after every lower one of the session."""
    statement = _BUMP_AND_TRIM_HISTORY if trim else _BUMP_HISTORY
    found: int | None = conn.execute(statement, {"b_id": session_id, "b_tenant_id": tenant_id}).scalar()
    return found


def stamps_history(event: Event) -> bool:
    """Whether projecting `event` stamps a message or part with its session's history revision (bumped
    once per transaction: `Writes.revision`)."""
    return event.type in _STAMPING


def apply_event(writes: Writes, event: Event) -> None:
    """Project one durable event onto the rows. Raises on a violated constraint or a missing row."""
    handler = _HANDLERS.get(event.type)
    if handler is None:
        raise ValueError(f"Not a durable event type: {event.type!r}")
    handler(writes, event.tenant_id, event.properties)


# --- statements, built once (bind parameters prefixed `b_` never clash with column names) -----------

_INSERT_SESSION: Insert = session.insert()
_UPDATE_SESSION: Update = update(session).where(
    session.c.id == bindparam("b_id"), session.c.tenant_id == bindparam("b_tenant_id")
)
_DELETE_SESSION: Delete = delete(session).where(
    session.c.id == bindparam("b_id"), session.c.tenant_id == bindparam("b_tenant_id")
)


def _add_usage(session_id: Any, tenant_id: Any, prefix: str = "b_") -> Update:
    """The session's totals grown by a usage given as bind parameters named with `prefix`."""
    return (
        update(session)
        .where(session.c.id == session_id, session.c.tenant_id == tenant_id)
        .values(
            cost=session.c.cost + bindparam(f"{prefix}cost"),
            tokens_input=session.c.tokens_input + bindparam(f"{prefix}input"),
            tokens_output=session.c.tokens_output + bindparam(f"{prefix}output"),
            tokens_reasoning=session.c.tokens_reasoning + bindparam(f"{prefix}reasoning"),
            tokens_cache_read=session.c.tokens_cache_read + bindparam(f"{prefix}cache_read"),
            tokens_cache_write=session.c.tokens_cache_write + bindparam(f"{prefix}cache_write"),
        )
    )


def _usage_params(usage: Usage, prefix: str = "b_") -> dict[str, Any]:
    return {
        f"{prefix}cost": usage.cost,
        f"{prefix}input": usage.input,
        f"{prefix}output": usage.output,
        f"{prefix}reasoning": usage.reasoning,
        f"{prefix}cache_read": usage.cache_read,
        f"{prefix}cache_write": usage.cache_write,
    }


_ADD_TO_TOTALS: Update = _add_usage(bindparam("b_id"), bindparam("b_tenant_id"))
_INSERT_MESSAGE: Insert = message.insert()
_INSERT_PART: Insert = part.insert()
_DELETE_MESSAGE: Delete = delete(message).where(
    message.c.id == bindparam("b_id"), message.c.tenant_id == bindparam("b_tenant_id")
)
_DELETE_PART: Delete = delete(part).where(
    part.c.id == bindparam("b_id"), part.c.tenant_id == bindparam("b_tenant_id")
)
_PART_DATA = select(part.c.data).where(
    part.c.id == bindparam("b_id"), part.c.tenant_id == bindparam("b_tenant_id")
)
# orjson writes `"type":"step-finish"` without spaces, and inside a JSON string the quotes would be
# escaped, so this LIKE only pre-filters; usage_of() still checks each row's real type.
_STEP_FINISH_DATA_OF_MESSAGE = select(part.c.data).where(
    part.c.message_id == bindparam("b_id"),
    part.c.tenant_id == bindparam("b_tenant_id"),
    part.c.data.contains(f'"type":"{STEP_FINISH}"', autoescape=True),
)

# What an upsert may change on an existing row: a part keeps its first `time_created`.
_UPSERT_COLUMNS: dict[str, tuple[str, ...]] = {
    "message": ("time_created", "data", "role", "time_completed", "compaction_boundary", "revision"),
    "part": ("data", "revision"),
}
_upserts: dict[tuple[str, str], Insert] = {}


def _once(table: Table) -> Once:
    """An upsert's rows meeting each row once: for an id given again, its first row's columns the
    conflict leaves alone (e.g. a part's `time_created`) with its last row's others, what the rows
    one after the other leave; None (no such list) when they name different owners (`_same_owner`)."""
    updated = _UPSERT_COLUMNS[table.name]
    owner = (
        ("tenant_id", "session_id", "message_id") if "message_id" in table.c else ("tenant_id", "session_id")
    )

    def once(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        by_id: dict[str, dict[str, Any]] = {}
        for row in rows:
            first = by_id.get(row["id"])
            if first is None:
                by_id[row["id"]] = row
            elif any(first[name] != row[name] for name in owner):
                return None
            else:
                by_id[row["id"]] = {**first, **{name: row[name] for name in updated}}
        return rows if len(by_id) == len(rows) else list(by_id.values())

    return once


_ONCE: dict[str, Once] = {"message": _once(message), "part": _once(part)}


def _upsert(writes: Writes, table: Table) -> Insert:
    """INSERT … ON CONFLICT (id) DO UPDATE in the connection's dialect, built once per dialect.

    The update only applies to a row of the same tenant and session, so one tenant can never overwrite
    another's row, nor a client-chosen id move a message or part between sessions.
    """
    dialect = writes.conn.dialect.name
    statement = _upserts.get((dialect, table.name))
    if statement is None:
        base = conflict_insert(dialect, table)
        statement = base.on_conflict_do_update(
            index_elements=[table.c.id],
            set_={name: base.excluded[name] for name in _UPSERT_COLUMNS[table.name]},
            where=_same_owner(table, base),
        )
        _upserts[(dialect, table.name)] = statement
    return statement


def _same_owner(table: Table, base: Any) -> ColumnElement[bool]:
    """The row an upsert may update: the same tenant and session, and for a part the same message
    (a part id never moves between messages, so a reused one cannot rewrite an earlier message)."""
    same: ColumnElement[bool] = (table.c.tenant_id == base.excluded.tenant_id) & (
        table.c.session_id == base.excluded.session_id
    )
    if "message_id" in table.c:
        same = same & (table.c.message_id == base.excluded.message_id)
    return same


# --- handlers ---------------------------------------------------------------------------------------


def _session_created(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    # Totals start at zero (column defaults) whatever `info` says: they are the sum of the session's
    # step-finish parts, which the projector adds up as they arrive.
    writes.defer(_INSERT_SESSION, {"id": props["info"]["id"], **_session_columns(tenant_id, props)})
    writes.created(tenant_id, props["info"]["id"])


def _session_updated(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    # A full replace of the row, except the running totals, which stay the projector's.
    session_id = props["info"]["id"]
    params = {"b_id": session_id, "b_tenant_id": tenant_id, **_session_columns(tenant_id, props)}
    writes.expect_row(_UPDATE_SESSION, params, f"session {session_id} does not exist")


def _session_columns(tenant_id: str, props: Mapping[str, Any]) -> dict[str, Any]:
    info = props["info"]
    return {
        "tenant_id": tenant_id,
        "parent_id": info.get("parentID"),
        "directory": info["directory"],
        "title": info["title"],
        "time_created": info["time"]["created"],
        "time_updated": info["time"]["updated"],
        "data": dumps(info),
    }


def _session_deleted(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    # Messages and parts go with it (ON DELETE CASCADE). Deleting twice is harmless.
    writes.forget(tenant_id, props["sessionID"])
    writes.defer(_DELETE_SESSION, {"b_id": props["sessionID"], "b_tenant_id": tenant_id})


def _message_updated(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    info = props["info"]
    row = {
        "id": info["id"],
        "tenant_id": tenant_id,
        "session_id": info["sessionID"],
        "time_created": info["time"]["created"],
        "data": dumps(info),
        "role": info["role"],
        "time_completed": message_time_completed(info),
        "compaction_boundary": message_compaction_boundary(info),
        "revision": writes.revision(tenant_id, info["sessionID"]),
    }
    if info["role"] != "user":
        # Assistant messages get their ids from the server: never taken, so batched like parts.
        writes.defer(_upsert(writes, message), row, _ONCE["message"])
        return
    # A client may choose a user message's id: counted, so an id already taken elsewhere fails this
    # event rather than vanish. Written with its parts (strict), the message is new: a plain
    # INSERT, so an id any row holds, in this session too, fails rather than overwrite it.
    if writes.strict:
        writes.insert(_INSERT_MESSAGE, row)
    else:
        writes.expect_row(
            _upsert(writes, message), row, f"message id {info['id']} is taken by another session"
        )


def message_compaction_boundary(info: Mapping[str, Any]) -> str | None:
    """The `compaction_boundary` column: on a finished summary without error, the compaction user
    message it answers; everything older is history the model no longer sees (KERNEL 6.4).
    Migration 0004 backfilled older rows by the same rule (with its own frozen copy of it)."""
    if info["role"] != "assistant" or not info.get("summary") or not info.get("finish") or info.get("error"):
        return None
    parent: str = info["parentID"]
    return parent


def message_time_completed(info: Mapping[str, Any]) -> int | None:
    """The `time_completed` column: None only for an assistant message still being written.

    A user message is complete once stored, so it takes its creation time and never looks open.
    Migration 0002 backfilled older rows by the same rule (with its own frozen copy of it).
    """
    time = info["time"]
    if info["role"] == "assistant":
        completed: int | None = time.get("completed")
        return completed
    created: int = time["created"]
    return created


def _message_removed(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    key = {"b_id": props["messageID"], "b_tenant_id": tenant_id}
    usage = NO_USAGE
    for (data,) in writes.run(_STEP_FINISH_DATA_OF_MESSAGE, key):
        usage = usage + usage_of(orjson.loads(data))
    writes.trim(tenant_id, props["sessionID"])
    writes.defer(_DELETE_MESSAGE, key)
    _add_to_totals(writes, tenant_id, props["sessionID"], -usage)


def _part_updated(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    new = props["part"]
    # Part kinds never change, so only a step-finish update can move the totals: read the previous
    # version only then, or when the audit wants it (a tool part's, `Writes.replaced_by`), on
    # Postgres in its upsert's statement (or expected there, where held), and keep the hot path
    # (text parts) to one deferred statement.
    counts = new.get("type") == STEP_FINISH
    replaced = writes.take_replaced(new["id"])
    row = {
        "id": new["id"],
        "tenant_id": tenant_id,
        "message_id": new["messageID"],
        "session_id": new["sessionID"],
        "time_created": props.get("time") or 0,
        "data": dumps(new),
        "revision": writes.revision(tenant_id, new["sessionID"]),
    }
    if counts and replaced is None and not writes.strict and reads_rows(writes.conn):
        # Deferred with the batch's other rows; the new usage added after it, the replaced
        # version's (rare) taken back once it has run.
        session_id = new["sessionID"]

        def take_back(data: str | None) -> None:
            if data is not None:
                _add_to_totals(writes, tenant_id, session_id, -usage_of(orjson.loads(data)))

        writes.defer_replacing(_upsert(writes, part), row, take_back, NEW)  # replaced: rare
        _add_to_totals(writes, tenant_id, session_id, usage_of(new))
        return
    if replaced is not None and not counts and reads_rows(writes.conn):
        # Sent (or held, expecting what the writer last wrote there) now, with what is pending, so
        # the audit has its entries before its chain is sent.
        written = writes.written
        expected = None if written is None else written.expected(tenant_id, new)
        writes.defer_replacing(_upsert(writes, part), row, replaced, expected)
        if written is not None:
            written.wrote(tenant_id, new, row["data"])
        writes.flush()
        return
    if (counts or replaced is not None) and not writes.strict and writes.conn.dialect.name == "postgresql":
        # The new usage is added in the upsert's statement; the replaced version's (rare) after it.
        data = _upsert_reading(writes, row, usage_of(new))
        if counts and data is not None:
            _add_to_totals(writes, tenant_id, new["sessionID"], -usage_of(orjson.loads(data)))
        if replaced is not None:
            replaced(data)
        return
    previous = _stored_part_usage(writes, tenant_id, new["id"]) if counts else NO_USAGE
    if writes.strict:
        # A part of a new user message (its id maybe a client's): new too, never an upsert.
        writes.insert(_INSERT_PART, row)
    else:
        writes.defer(_upsert(writes, part), row, _ONCE["part"])
    if counts:
        _add_to_totals(writes, tenant_id, new["sessionID"], usage_of(new) - previous)


_CHECKPOINT_PART: Update = (
    update(part)
    .where(
        part.c.id == bindparam("b_id"),
        part.c.tenant_id == bindparam("b_tenant_id"),
        part.c.session_id == bindparam("b_session_id"),
    )
    .values(data=bindparam("b_data"), revision=bindparam("b_revision"))
)


def checkpoint_part(conn: Connection, tenant_id: str, new: Mapping[str, Any]) -> None:
    """Overwrite a streaming part's row with its content so far. No event: the log keeps the part's
    start and end, the row keeps what a crash would otherwise lose. A part already removed stays so.
    Never appends to the audit chain: its mutation says so (`store.checkpointing`, may_audit)."""
    revision = bump_history(conn, tenant_id, new["sessionID"])
    if revision is None:
        return  # the session is gone, and its parts with it
    params = {
        "b_id": new["id"],
        "b_tenant_id": tenant_id,
        "b_session_id": new["sessionID"],
        "b_data": dumps(new),
        "b_revision": revision,
    }
    conn.execute(_CHECKPOINT_PART, params)


def _part_removed(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    part_id = props["partID"]
    usage = _stored_part_usage(writes, tenant_id, part_id)
    writes.trim(tenant_id, props["sessionID"])
    writes.defer(_DELETE_PART, {"b_id": part_id, "b_tenant_id": tenant_id})
    _add_to_totals(writes, tenant_id, props["sessionID"], -usage)


_upserts_reading: dict[tuple[str, bool], Select[tuple[str | None]]] = {}


def _upsert_reading(writes: Writes, row: dict[str, Any], usage: Usage) -> str | None:
    """Upsert a part's row and return the data of the version it replaced (None: a new part) in one
    statement, where a read of the stored row and the upsert take two round trips on Postgres: the
    upsert in a WITH, whose snapshot the SELECT shares, so it reads the row as it was before. Its
    session's totals grow by `usage` in the same statement (another WITH)."""
    dialect = writes.conn.dialect.name
    adds = usage != NO_USAGE
    statement = _upserts_reading.get((dialect, adds))
    if statement is None:
        base = conflict_insert(dialect, part).values(
            {column.name: bindparam(f"v_{column.name}") for column in part.c}
        )
        upsert = base.on_conflict_do_update(
            index_elements=[part.c.id],
            set_={name: base.excluded[name] for name in _UPSERT_COLUMNS["part"]},
            where=_same_owner(part, base),
        )
        previous = select(part.c.data).where(
            part.c.id == bindparam("v_id"), part.c.tenant_id == bindparam("v_tenant_id")
        )
        statement = select(previous.scalar_subquery()).add_cte(upsert.cte("upserted"))
        if adds:
            totals = _add_usage(bindparam("v_session_id"), bindparam("v_tenant_id"), prefix="u_")
            statement = statement.add_cte(totals.cte("totals"))
        _upserts_reading[(dialect, adds)] = statement
    params = {f"v_{name}": value for name, value in row.items()}
    if adds:
        params.update(_usage_params(usage, prefix="u_"))
    data: str | None = writes.run(statement, params).scalar()
    return data


def _stored_part_usage(writes: Writes, tenant_id: str, part_id: str) -> Usage:
    data = writes.run(_PART_DATA, {"b_id": part_id, "b_tenant_id": tenant_id}).scalar_one_or_none()
    return NO_USAGE if data is None else usage_of(orjson.loads(data))


def _add_to_totals(writes: Writes, tenant_id: str, session_id: str, usage: Usage) -> None:
    if usage == NO_USAGE:
        return
    writes.defer(_ADD_TO_TOTALS, {"b_id": session_id, "b_tenant_id": tenant_id, **_usage_params(usage)})


# --- interaction records: permission requests and todo lists -----------------------------------------

_INSERT_PERMISSION_REQUEST: Insert = permission_request.insert()
_DECIDE_PERMISSION_REQUEST: Update = (
    update(permission_request)
    .where(
        permission_request.c.id == bindparam("b_id"),
        permission_request.c.tenant_id == bindparam("b_tenant_id"),
    )
    .values(
        status=bindparam("b_status"),
        decision=bindparam("b_decision"),
        decided_by=bindparam("b_decided_by"),
        feedback=bindparam("b_feedback"),
        time_decided=bindparam("b_time_decided"),
    )
)
_todo_upserts: dict[str, Insert] = {}


def _permission_asked(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    tool = props.get("tool") or {}
    times = props["time"]
    row = {
        "id": props["id"],
        "tenant_id": tenant_id,
        "session_id": props["sessionID"],
        "message_id": tool.get("messageID"),
        "call_id": tool.get("callID"),
        "permission": props["permission"],
        "patterns": dumps(props["patterns"]),
        "always": dumps(props.get("always", [])),
        "metadata": dumps(props.get("metadata", {})),
        "status": "pending",
        "decision": None,
        "decided_by": None,
        "feedback": None,
        "time_created": times["created"],
        "deadline": times["deadline"],
        "time_decided": None,
    }
    writes.defer(_INSERT_PERMISSION_REQUEST, row)


def _permission_replied(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    request_id = props["requestID"]
    params = {
        "b_id": request_id,
        "b_tenant_id": tenant_id,
        "b_status": props["status"],
        "b_decision": props["decision"],
        "b_decided_by": props["decidedBy"],
        "b_feedback": props.get("message"),
        "b_time_decided": props["time"],
    }
    writes.expect_row(_DECIDE_PERMISSION_REQUEST, params, f"permission request {request_id} does not exist")


def _todo_updated(writes: Writes, tenant_id: str, props: Mapping[str, Any]) -> None:
    row = {
        "session_id": props["sessionID"],
        "tenant_id": tenant_id,
        "data": dumps(props["todos"]),
        "time_updated": int(time.time() * 1000),
    }
    writes.defer(_todo_upsert(writes), row)


def _todo_upsert(writes: Writes) -> Insert:
    """INSERT … ON CONFLICT (session_id) DO UPDATE, only within the same tenant (as `_upsert`)."""
    dialect = writes.conn.dialect.name
    statement = _todo_upserts.get(dialect)
    if statement is None:
        base = conflict_insert(dialect, todo)
        statement = base.on_conflict_do_update(
            index_elements=[todo.c.session_id],
            set_={"data": base.excluded.data, "time_updated": base.excluded.time_updated},
            where=todo.c.tenant_id == base.excluded.tenant_id,
        )
        _todo_upserts[dialect] = statement
    return statement


_STAMPING = frozenset({ev.MESSAGE_UPDATED, ev.PART_UPDATED})

_HANDLERS: dict[str, Callable[[Writes, str, Mapping[str, Any]], None]] = {
    ev.SESSION_CREATED: _session_created,
    ev.SESSION_UPDATED: _session_updated,
    ev.SESSION_DELETED: _session_deleted,
    ev.MESSAGE_UPDATED: _message_updated,
    ev.MESSAGE_REMOVED: _message_removed,
    ev.PART_UPDATED: _part_updated,
    ev.PART_REMOVED: _part_removed,
    ev.PERMISSION_ASKED: _permission_asked,
    ev.PERMISSION_REPLIED: _permission_replied,
    ev.TODO_UPDATED: _todo_updated,
}
