"""Open assistant messages: the `role`/`time_completed` columns, their partial index, and migration 0002.

Start-up crash recovery reads `Store.open_assistant_messages`; these tests pin what counts as open,
that the query is served by the partial index, and that upgrading an existing database backfills
the columns from the message JSON.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import orjson
import sqlalchemy as sa
from alembic import command
from sqlalchemy import Connection, event
from sqlalchemy.schema import CreateIndex

from agentforge.model.message import AssistantMessage, UserMessage
from agentforge.model.session import Session
from agentforge.store import Store, parse_database_url, queries
from agentforge.store.migrate import alembic_config, current_revision, run_with_connection, upgrade
from agentforge.store.schema import message
from tests.databases import owner_url_for
from tests.store.builders import (
    assistant_message,
    message_updated,
    new_session,
    part_updated,
    session_created,
    text_part,
    user_message,
)

TENANT = "default"
OTHER_TENANT = "acme"


def _completed(message: AssistantMessage, at: int = 1_700_000_000_999) -> AssistantMessage:
    done = message.model_copy(deep=True)
    done.time.completed = at
    return done


async def _run(database_url: str, work: Callable[[Connection], Any]) -> Any:
    """Run `work` on a plain connection to the test database as its owner (on Postgres the runtime
    role would see no row without a tenant) and return its result."""
    result: list[Any] = []
    owner = parse_database_url(owner_url_for(database_url) or database_url)
    await asyncio.to_thread(run_with_connection, owner, lambda conn: result.append(work(conn)))
    return result[0]


def _message_columns(conn: Connection) -> dict[str, tuple[str | None, int | None]]:
    rows = conn.execute(sa.text("SELECT id, role, time_completed FROM message"))
    return {row.id: (row.role, row.time_completed) for row in rows}


async def _session(store: Store, tenant_id: str = TENANT) -> Session:
    session = new_session()
    await store.write(session_created(session, tenant_id))
    return session


async def test_only_assistant_messages_without_completion_time_are_open(store: Store) -> None:
    session = await _session(store)
    user = user_message(session.id)
    running = assistant_message(session.id, user.id)
    finished = _completed(assistant_message(session.id, user.id))
    for written in (user, running, finished):
        await store.write(message_updated(written))
    first, second = text_part(running, "thinking aloud"), text_part(running, "more")
    await store.write(part_updated(second))
    await store.write(part_updated(first))
    await store.write(part_updated(text_part(finished, "done")))

    found = await store.open_assistant_messages()

    assert [(tenant, item.info) for tenant, item in found] == [(TENANT, running)]
    assert found[0][1].parts == [first, second]


async def test_a_message_stops_being_open_once_completed(store: Store) -> None:
    session = await _session(store)
    user = user_message(session.id)
    running = assistant_message(session.id, user.id)
    await store.write(message_updated(user))
    await store.write(message_updated(running))
    assert [item.info.id for _, item in await store.open_assistant_messages()] == [running.id]

    await store.write(message_updated(_completed(running)))

    assert await store.open_assistant_messages() == []


async def test_user_messages_never_count_as_open(store: Store, database_url: str) -> None:
    session = await _session(store)
    user = user_message(session.id, created=1_700_000_000_123)
    await store.write(message_updated(user))

    assert await store.open_assistant_messages() == []
    columns = await _run(database_url, _message_columns)
    assert columns == {user.id: ("user", 1_700_000_000_123)}


async def test_open_messages_span_tenants_oldest_first_up_to_the_limit(store: Store) -> None:
    ours, theirs = await _session(store), await _session(store, OTHER_TENANT)
    opened: list[tuple[str, AssistantMessage]] = []
    for tenant, session in ((TENANT, ours), (OTHER_TENANT, theirs), (TENANT, ours)):
        user = user_message(session.id)
        reply = assistant_message(session.id, user.id)
        await store.write(message_updated(user, tenant))
        await store.write(message_updated(reply, tenant))
        await store.write(part_updated(text_part(reply, f"from {tenant}"), tenant))
        opened.append((tenant, reply))

    everything = await store.open_assistant_messages()
    first_two = await store.open_assistant_messages(limit=2)

    assert [(tenant, item.info) for tenant, item in everything] == opened
    assert [[p.text for p in item.parts] for _, item in everything] == [  # type: ignore[union-attr]
        [f"from {tenant}"] for tenant, _ in opened
    ]
    assert [(tenant, item.info) for tenant, item in first_two] == opened[:2]
    # The failover pass's look: their sessions alone, each once, in the same order and limit.
    assert await store.open_turn_sessions() == [ours.id, theirs.id]
    assert await store.open_turn_sessions(limit=1) == [ours.id]


async def test_the_open_message_query_uses_the_partial_index(store: Store, database_url: str) -> None:
    def plan(conn: Connection) -> str:
        captured: list[tuple[str, Any]] = []

        def capture(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
            if statement.lstrip().upper().startswith("SELECT"):
                captured.append((statement, params))

        event.listen(conn, "before_cursor_execute", capture)
        try:
            queries.open_assistant_messages(conn)
        finally:
            event.remove(conn, "before_cursor_execute", capture)
        statement, params = captured[0]
        if conn.dialect.name == "sqlite":
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
            return " ".join(str(row[-1]) for row in rows)
        # An empty table is cheapest to scan: make the planner show whether it can use the index.
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        return " ".join(str(row[0]) for row in conn.exec_driver_sql(f"EXPLAIN {statement}", params))

    assert "ix_message_open_assistant" in await _run(database_url, plan)


def _normalized_sql(sql: str) -> str:
    """Postgres reflects `((role = 'assistant'::text) AND ...)`: drop casts, parentheses, case, spacing."""
    return " ".join(re.sub(r"::\w+|[()]", " ", sql).lower().split())


async def test_the_migrated_partial_index_has_the_schema_s_where_clause(
    store: Store, database_url: str
) -> None:
    # Alembic's autogenerate compare ignores partial-index predicates, so check this one by hand.
    index = next(ix for ix in message.indexes if ix.name == "ix_message_open_assistant")

    def reflected_and_declared(conn: Connection) -> tuple[list[str], str, str]:
        dialect = conn.dialect.name
        reflected = next(ix for ix in sa.inspect(conn).get_indexes("message") if ix["name"] == index.name)
        declared = str(CreateIndex(index).compile(dialect=conn.dialect)).split(" WHERE ", 1)[1]
        columns = [str(column) for column in reflected["column_names"]]
        return columns, str(reflected["dialect_options"][f"{dialect}_where"]), declared

    columns, reflected_where, declared_where = await _run(database_url, reflected_and_declared)

    assert columns == ["id"]
    assert _normalized_sql(reflected_where) == _normalized_sql(declared_where)
    assert _normalized_sql(declared_where) == "role = 'assistant' and time_completed is null"


# --- migration 0002: existing rows get their columns from the JSON ---------------------------------

_SESSION = sa.table(
    "session",
    *(sa.column(name) for name in ("id", "tenant_id", "directory", "title", "time_created")),
    *(sa.column(name) for name in ("time_updated", "cost", "data")),
    *(sa.column(f"tokens_{kind}") for kind in ("input", "output", "reasoning", "cache_read", "cache_write")),
)
_MESSAGE = sa.table(
    "message", *(sa.column(n) for n in ("id", "tenant_id", "session_id", "time_created", "data"))
)
_PART = sa.table(
    "part", *(sa.column(n) for n in ("id", "tenant_id", "message_id", "session_id", "time_created", "data"))
)


def _session_row(session: Session) -> dict[str, Any]:
    tokens = dict.fromkeys(
        ("tokens_input", "tokens_output", "tokens_reasoning", "tokens_cache_read", "tokens_cache_write"), 0
    )
    return {
        "id": session.id,
        "tenant_id": TENANT,
        "directory": session.directory,
        "title": session.title,
        "time_created": session.time.created,
        "time_updated": session.time.updated,
        "cost": 0.0,
        "data": orjson.dumps(session.wire()).decode(),
        **tokens,
    }


def _message_row(message: UserMessage | AssistantMessage) -> dict[str, Any]:
    return {
        "id": message.id,
        "tenant_id": TENANT,
        "session_id": message.session_id,
        "time_created": message.time.created,
        "data": orjson.dumps(message.wire()).decode(),
    }


async def test_upgrading_from_0001_backfills_role_and_completion_in_batches(
    empty_database_url: str,
) -> None:
    database_url = empty_database_url
    session = new_session()
    # More rows than one backfill batch (500), so the batching loop goes round several times.
    users = [user_message(session.id, created=1_700_000_000_000 + i) for i in range(1100)]
    running = assistant_message(session.id, users[-1].id)
    finished = _completed(assistant_message(session.id, users[0].id), at=1_700_000_009_000)
    part = text_part(running, "left open by an old version")

    def create_at_0001_with_rows(conn: Connection) -> str | None:
        upgrade(conn, "0001_initial")
        conn.execute(_SESSION.insert(), [_session_row(session)])
        messages: list[UserMessage | AssistantMessage] = [*users, running, finished]
        conn.execute(_MESSAGE.insert(), [_message_row(m) for m in messages])
        conn.execute(
            _PART.insert(),
            [
                {
                    "id": part.id,
                    "tenant_id": TENANT,
                    "message_id": running.id,
                    "session_id": session.id,
                    "time_created": 1,
                    "data": orjson.dumps(part.wire()).decode(),
                }
            ],
        )
        return current_revision(conn)

    assert await _run(database_url, create_at_0001_with_rows) == "0001_initial"

    store = await Store.open(database_url, owner_url=owner_url_for(database_url))  # upgrades to head
    try:
        found = await store.open_assistant_messages()
    finally:
        await store.close()

    columns = await _run(database_url, _message_columns)
    assert len(columns) == len(users) + 2
    assert all(columns[u.id] == ("user", u.time.created) for u in users)
    assert columns[running.id] == ("assistant", None)
    assert columns[finished.id] == ("assistant", 1_700_000_009_000)
    assert [(tenant, item.info, item.parts) for tenant, item in found] == [(TENANT, running, [part])]


async def test_downgrading_0002_drops_the_columns_and_keeps_every_row(database_url: str) -> None:
    session = new_session()
    store = await Store.open(database_url)
    try:
        await store.write(session_created(session))
        user = user_message(session.id)
        await store.write(message_updated(user))
        await store.write(part_updated(text_part(user, "still here")))
    finally:
        await store.close()

    def downgrade_and_look(conn: Connection) -> dict[str, Any]:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "0001_initial")
        inspector = sa.inspect(conn)
        return {
            "revision": current_revision(conn),
            "columns": {c["name"] for c in inspector.get_columns("message")},
            "indexes": {ix["name"] for ix in inspector.get_indexes("message")},
            "parts": conn.execute(sa.text("SELECT count(*) FROM part")).scalar(),
        }

    after = await _run(database_url, downgrade_and_look)

    assert after["revision"] == "0001_initial"
    assert after["columns"] == {"id", "tenant_id", "session_id", "time_created", "data"}
    assert after["indexes"] == {"ix_message_session_id_id"}
    assert after["parts"] == 1  # no table rebuild, so no cascade took the parts with it
