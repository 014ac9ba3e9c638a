"""The projector's pending writes (store/projector.py `Writes`): rows an upsert writes again later in
a transaction fold into its earlier run only where nobody could tell, so the rows come out as the
statements one after the other leave them, in fewer statements."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentforge.store import Store
from agentforge.store.projector import (
    _DELETE_MESSAGE,
    _DELETE_PART,
    _DELETE_SESSION,
    _ONCE,
    _UPDATE_SESSION,
    Writes,
    _upsert,
)
from agentforge.store.schema import message, metadata, part, session
from tests.store.builders import new_session, session_created
from tests.store.test_direct import TENANT, _in_tenant, _postgres_only, _writes

SESSION = "ses_a"

# An op: what the projector defers, as (kind, id, owner or value, value).
Op = tuple[str, str, str, int]

_OPS = st.one_of(
    st.tuples(st.just("message"), st.sampled_from(["msg_a", "msg_b"]), st.just(""), st.integers(0, 3)),
    st.tuples(
        st.just("part"),
        st.sampled_from(["prt_p", "prt_q"]),
        st.sampled_from(["msg_a", "msg_b"]),
        st.integers(0, 3),
    ),
    st.tuples(st.just("delete_part"), st.sampled_from(["prt_p", "prt_q"]), st.just(""), st.just(0)),
    st.tuples(st.just("delete_message"), st.sampled_from(["msg_a", "msg_b"]), st.just(""), st.just(0)),
    st.tuples(st.just("rename"), st.just(SESSION), st.just(""), st.integers(0, 3)),
    st.tuples(st.just("touch_part"), st.sampled_from(["prt_p", "prt_q"]), st.just(""), st.integers(0, 3)),
    st.tuples(st.just("delete_session"), st.just(SESSION), st.just(""), st.just(0)),
)
# Another statement on the part table (as a replaced part's read-and-write would be).
_TOUCH_PART = (
    sa.update(part)
    .where(part.c.id == sa.bindparam("b_id"), part.c.tenant_id == sa.bindparam("b_tenant_id"))
    .values(data=sa.bindparam("b_data"))
)


def _engine() -> sa.Engine:
    engine = sa.create_engine("sqlite://")

    @sa.event.listens_for(engine, "connect")
    def _foreign_keys(dbapi_connection: Any, _: Any) -> None:
        dbapi_connection.execute("PRAGMA foreign_keys=ON")  # as the store's SQLite connections

    metadata.create_all(engine)
    return engine


@pytest.fixture
def engine() -> Iterator[sa.Engine]:
    engine = _engine()
    yield engine
    engine.dispose()


def _message_row(message_id: str, value: int, session_id: str = SESSION) -> dict[str, Any]:
    return {
        "id": message_id,
        "tenant_id": TENANT,
        "session_id": session_id,
        "time_created": 100 + value,
        "data": f'{{"v":{value}}}',
        "role": "assistant",
        "time_completed": value if value % 2 else None,
        "compaction_boundary": None,
        "revision": 1,
    }


def _part_row(part_id: str, message_id: str, value: int, session_id: str = SESSION) -> dict[str, Any]:
    return {
        "id": part_id,
        "tenant_id": TENANT,
        "message_id": message_id,
        "session_id": session_id,
        "time_created": 100 + value,
        "data": f'{{"v":{value}}}',
        "revision": 1,
    }


def _statement(writes: Writes, op: Op) -> tuple[Any, dict[str, Any], Any]:
    """The statement, row and `once` the projector defers for `op`."""
    kind, key, owner, value = op
    if kind == "message":
        return _upsert(writes, message), _message_row(key, value), _ONCE["message"]
    if kind == "part":
        return _upsert(writes, part), _part_row(key, owner, value), _ONCE["part"]
    if kind == "rename":
        session_columns = {"b_id": key, "b_tenant_id": TENANT, "title": f"t{value}"}
        return _UPDATE_SESSION.values(title=sa.bindparam("title")), session_columns, None
    if kind == "touch_part":
        return _TOUCH_PART, {"b_id": key, "b_tenant_id": TENANT, "b_data": f"touched {value}"}, None
    deleted = {
        "delete_part": _DELETE_PART,
        "delete_message": _DELETE_MESSAGE,
        "delete_session": _DELETE_SESSION,
    }
    return deleted[kind], {"b_id": key, "b_tenant_id": TENANT}, None


def _rows(conn: sa.Connection) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table.name: [
            tuple(row) for row in conn.execute(sa.select(table).order_by(*table.primary_key.columns))
        ]
        for table in (session, message, part)
    }


def _start(conn: sa.Connection) -> None:
    conn.execute(
        session.insert(),
        {
            "id": SESSION,
            "tenant_id": TENANT,
            "directory": "/w",
            "title": "t",
            "time_created": 1,
            "time_updated": 1,
            "data": "{}",
        },
    )


def _one_by_one(conn: sa.Connection, ops: list[Op]) -> dict[str, list[tuple[Any, ...]]] | None:
    """The rows the ops' statements leave, each executed by itself in order (None: one failed)."""
    writes = Writes(conn)
    try:
        with conn.begin_nested():
            for op in ops:
                statement, row, _ = _statement(writes, op)
                conn.execute(statement, row)
    except sa.exc.IntegrityError:
        return None
    return _rows(conn)


def _deferred(conn: sa.Connection, ops: list[Op]) -> dict[str, list[tuple[Any, ...]]] | None:
    """The rows the projector's deferred writes of the ops leave (None: they failed)."""
    writes = Writes(conn)
    try:
        with conn.begin_nested():
            for op in ops:
                statement, row, once = _statement(writes, op)
                writes.defer(statement, row, once)
            writes.flush()
    except sa.exc.IntegrityError:
        return None
    return _rows(conn)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OPS, max_size=10))
# What folding past a statement that could tell would get wrong: another write of the same row
# between, and a DELETE cascading to it.
@example(
    ops=[
        ("message", "msg_a", "", 0),
        ("part", "prt_p", "msg_a", 0),
        ("touch_part", "prt_p", "", 0),
        ("part", "prt_p", "msg_a", 1),
    ]
)
@example(ops=[("message", "msg_a", "", 0), ("delete_session", SESSION, "", 0), ("message", "msg_a", "", 1)])
def test_deferred_writes_leave_the_rows_their_statements_leave_one_by_one(
    engine: sa.Engine, ops: list[Op]
) -> None:
    with engine.connect() as conn:
        _start(conn)
        expected = _one_by_one(conn, ops)
        conn.rollback()
        _start(conn)
        assert _deferred(conn, ops) == expected
        conn.rollback()


def test_a_row_written_again_folds_only_past_statements_that_cannot_tell(engine: sa.Engine) -> None:
    """Past a run on another table: folded (one run fewer). Past a DELETE (it may cascade), a run on
    the same table, or with an id the earlier run does not write: a run of its own."""
    cases: list[tuple[list[Op], int]] = [
        ([("message", "msg_a", "", 0), ("part", "prt_p", "msg_a", 0), ("message", "msg_a", "", 1)], 2),
        ([("message", "msg_a", "", 0), ("rename", SESSION, "", 1), ("message", "msg_a", "", 1)], 2),
        ([("message", "msg_a", "", 0), ("delete_part", "prt_p", "", 0), ("message", "msg_a", "", 1)], 3),
        ([("message", "msg_a", "", 0), ("message", "msg_b", "", 0), ("part", "prt_p", "msg_a", 0)], 2),
        ([("message", "msg_a", "", 0), ("part", "prt_p", "msg_a", 0), ("message", "msg_b", "", 1)], 3),
        (
            [
                ("part", "prt_p", "msg_a", 0),
                ("delete_message", "msg_b", "", 0),
                ("part", "prt_p", "msg_a", 1),
            ],
            3,
        ),
        ([("part", "prt_p", "msg_a", 0), ("touch_part", "prt_q", "", 0), ("part", "prt_p", "msg_a", 1)], 3),
        ([("message", "msg_a", "", 0), ("delete_session", SESSION, "", 0), ("message", "msg_a", "", 1)], 3),
    ]
    with engine.connect() as conn:
        for ops, runs in cases:
            writes = Writes(conn)
            for op in ops:
                statement, row, once = _statement(writes, op)
                writes.defer(statement, row, once)
            assert len(writes._runs) == runs, ops


async def test_postgres_a_reply_created_and_finished_in_one_batch_is_one_statement(
    store: Store, database_url: str
) -> None:
    """A message created, its parts, its session touched, then the message finished, all pending at
    once (a fast reply): one statement, rows as the runs one after the other leave them."""
    target = _postgres_only(database_url)
    created = new_session()
    await store.write(session_created(created))
    async with _in_tenant(target) as (conn, driver, statements):

        def write(sync: sa.Connection) -> None:
            writes = Writes(sync)
            writes.defer(_upsert(writes, message), _message_row("msg_a", 0, created.id), _ONCE["message"])
            writes.defer(_upsert(writes, part), _part_row("prt_p", "msg_a", 0, created.id), _ONCE["part"])
            rename = {"b_id": created.id, "b_tenant_id": TENANT, "title": "renamed"}
            writes.defer(_UPDATE_SESSION.values(title=sa.bindparam("title")), rename)
            writes.defer(_upsert(writes, message), _message_row("msg_a", 1, created.id), _ONCE["message"])
            writes.flush()

        await _writes(driver, statements)
        statements.clear()
        await conn.run_sync(write)
        assert [query.startswith("WITH ") for query in await _writes(driver, statements)] == [True]
        found = await conn.execute(
            sa.select(message.c.time_created, message.c.data, message.c.time_completed)
        )
        assert [tuple(row) for row in found] == [(101, '{"v":1}', 1)]
