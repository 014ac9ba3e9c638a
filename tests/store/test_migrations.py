"""Migrations: `Store.open` brings an empty database to head, and head is exactly `schema.py`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from agentforge.store import Store, parse_database_url
from agentforge.store.migrate import MigrationError, head_revision, run_with_connection
from agentforge.store.schema import metadata
from tests.databases import owner_url_for
from tests.store.builders import new_session, session_created


def _inspect_schema(conn: Connection) -> dict[str, Any]:
    context = MigrationContext.configure(conn)
    inspector = inspect(conn)
    return {
        "revision": context.get_current_revision(),
        "differences": compare_metadata(context, metadata),
        "tables": set(inspector.get_table_names()),
        "event_unique": inspector.get_unique_constraints("event"),
        "part_indexes": {ix["name"]: ix["column_names"] for ix in inspector.get_indexes("part")},
        "tenant_columns": {
            table: next(c for c in inspector.get_columns(table) if c["name"] == "tenant_id")["nullable"]
            for table in ("session", "message", "part", "event")
        },
    }


async def _schema_of(database_url: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    await asyncio.to_thread(
        run_with_connection,
        parse_database_url(database_url),
        lambda conn: found.update(_inspect_schema(conn)),
    )
    return found


async def test_open_migrates_to_head_and_head_matches_the_tables(empty_database_url: str) -> None:
    database_url = empty_database_url
    store = await Store.open(database_url, owner_url=owner_url_for(database_url))
    await store.close()

    schema = await _schema_of(database_url)

    # Every revision is applied, whichever is newest; that head matches schema.py is checked below.
    head = head_revision()
    assert head is not None and schema["revision"] == head
    assert schema["differences"] == []
    assert {"session", "message", "part", "event", "alembic_version"} <= schema["tables"]
    assert sorted((u["name"], u["column_names"]) for u in schema["event_unique"]) == [
        ("uq_event_session_id_seq", ["session_id", "seq"]),
        ("uq_event_tenant_id_position", ["tenant_id", "position"]),
    ]
    assert schema["part_indexes"] == {
        "ix_part_message_id_id": ["message_id", "id"],
        "ix_part_session_id_id": ["session_id", "id"],
    }
    assert schema["tenant_columns"] == dict.fromkeys(("session", "message", "part", "event"), False)


async def test_opening_again_keeps_the_data(database_url: str) -> None:
    session = new_session()
    first = await Store.open(database_url)
    try:
        await first.write(session_created(session))
    finally:
        await first.close()

    second = await Store.open(database_url)
    try:
        assert await second.get_session("default", session.id) == session
    finally:
        await second.close()


async def test_a_runtime_role_cannot_migrate_and_is_told_what_to_do(empty_database_url: str) -> None:
    if parse_database_url(empty_database_url).dialect != "postgresql":
        pytest.skip("SQLite has no roles")
    with pytest.raises(MigrationError, match="agentforge db migrate"):
        await Store.open(empty_database_url)
