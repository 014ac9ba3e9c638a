"""Migrations: `Store.open` brings an empty database to head, and head is exactly `schema.py`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect, text

from agentforge.store import Store, parse_database_url
from agentforge.store.migrate import (
    HEAD_REVISION,
    MigrationError,
    create_schema_if_missing,
    current_revision,
    head_revision,
    run_with_connection,
    scripts_head,
    upgrade,
)
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
        "ix_part_session_id_revision": ["session_id", "revision"],
    }
    assert schema["tenant_columns"] == dict.fromkeys(("session", "message", "part", "event"), False)


def test_the_head_the_store_knows_is_the_scripts_head() -> None:
    assert HEAD_REVISION == head_revision() == scripts_head()


async def test_a_database_behind_head_is_upgraded_on_open(empty_database_url: str) -> None:
    owner_url = owner_url_for(empty_database_url)
    target = parse_database_url(owner_url or empty_database_url)

    def to_0009(conn: Connection) -> None:
        if target.schema is not None:
            create_schema_if_missing(conn, target.schema)
        upgrade(conn, "0009_replicas")

    await asyncio.to_thread(run_with_connection, target, to_0009)
    store = await Store.open(empty_database_url, owner_url=owner_url)
    await store.close()
    assert (await _schema_of(empty_database_url))["revision"] == HEAD_REVISION


REOPEN = textwrap.dedent(
    """
    import asyncio, sys
    from agentforge.store import Store

    async def main():
        store = await Store.open(sys.argv[1])
        await store.close()

    asyncio.run(main())
    print("alembic" in sys.modules)
    """
)


async def test_opening_a_database_at_head_does_not_load_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'forge.db'}"
    await (await Store.open(url)).close()
    reopened = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", REOPEN, url], capture_output=True, text=True, timeout=60
    )
    assert reopened.returncode == 0, reopened.stderr
    assert reopened.stdout.split() == ["False"]
    found: list[str | None] = []
    await asyncio.to_thread(
        run_with_connection, parse_database_url(url), lambda conn: found.append(current_revision(conn))
    )
    assert found == [HEAD_REVISION]


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


def _upgrade_through_0006_with_events(conn: Connection, schema: str | None) -> None:
    if schema is not None:
        create_schema_if_missing(conn, schema)
    upgrade(conn, "0006_row_level_security")
    rows = [
        # (id, tenant, session, seq): ids ascend with time, across sessions.
        ("evt_01", "a", "ses_1", 1),
        ("evt_02", "b", "ses_2", 1),
        ("evt_03", "a", "ses_3", 1),
        ("evt_04", "a", "ses_1", 2),
    ]
    for event_id, tenant, session_id, seq in rows:
        conn.execute(
            text(
                "INSERT INTO event (id, tenant_id, session_id, seq, type, data, time_created) "
                "VALUES (:id, :tenant, :session, :seq, 'session.updated', '{}', 1)"
            ),
            {"id": event_id, "tenant": tenant, "session": session_id, "seq": seq},
        )
    conn.commit()
    upgrade(conn)


async def test_0007_numbers_existing_events_per_tenant_in_id_order(empty_database_url: str) -> None:
    target = parse_database_url(owner_url_for(empty_database_url) or empty_database_url)
    found: list[Any] = []

    def migrate_and_read(conn: Connection) -> None:
        _upgrade_through_0006_with_events(conn, target.schema)
        found.extend(conn.execute(text("SELECT id, tenant_id, position FROM event ORDER BY id")))

    await asyncio.to_thread(run_with_connection, target, migrate_and_read)

    assert [tuple(row) for row in found] == [
        ("evt_01", "a", 1),
        ("evt_02", "b", 1),
        ("evt_03", "a", 2),
        ("evt_04", "a", 3),
    ]
