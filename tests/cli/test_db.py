"""`agentforge db migrate`: the operator migrates as the owner; the server then runs as the runtime role."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner, Result

from agentforge.cli.main import app
from agentforge.store import Store
from agentforge.store.migrate import head_revision
from tests.databases import OWNER_ROLE, RUNTIME_ROLE, owner_url_for
from tests.store.builders import new_session, session_created


async def _invoke(*args: str) -> Result:
    # In a worker thread: the command runs its own event loop for Postgres.
    return await asyncio.to_thread(CliRunner().invoke, app, ["db", "migrate", *args])


async def test_migrate_then_the_runtime_role_alone_runs_the_store(empty_database_url: str) -> None:
    owner_url = owner_url_for(empty_database_url)
    if owner_url is None:
        pytest.skip("Postgres roles; SQLite is covered below")

    result = await _invoke("--owner-db", owner_url, "--runtime-role", RUNTIME_ROLE)

    assert result.exit_code == 0, result.output
    assert f"database at revision {head_revision()}" in result.output
    assert f"granted the runtime privileges to role {RUNTIME_ROLE}" in result.output
    # No owner URL: the server finds the schema at head and needs no DDL right.
    store = await Store.open(empty_database_url)
    try:
        session = new_session()
        await store.write(session_created(session))
        assert await store.get_session("default", session.id) == session
    finally:
        await store.close()


async def test_migrate_refuses_the_owner_as_runtime_role(empty_database_url: str) -> None:
    owner_url = owner_url_for(empty_database_url)
    if owner_url is None:
        pytest.skip("Postgres roles")
    result = await _invoke("--owner-db", owner_url, "--runtime-role", OWNER_ROLE)
    assert result.exit_code == 2
    assert "must not be the role that owns the tables" in result.output


async def test_migrate_names_a_missing_role(empty_database_url: str) -> None:
    owner_url = owner_url_for(empty_database_url)
    if owner_url is None:
        pytest.skip("Postgres roles")
    result = await _invoke("--owner-db", owner_url, "--runtime-role", "agentforge_no_such_role")
    assert result.exit_code == 1
    assert 'role "agentforge_no_such_role" does not exist' in result.output


async def test_migrate_a_sqlite_database(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/forge.db"
    result = await _invoke("--owner-db", url)
    assert result.exit_code == 0, result.output
    assert f"database at revision {head_revision()}" in result.output

    refused = await _invoke("--owner-db", url, "--runtime-role", "server")
    assert refused.exit_code == 2
    assert "only applies to Postgres" in refused.output


async def test_migrate_rejects_a_bad_url() -> None:
    result = await _invoke("--owner-db", "mysql://db/forge")
    assert result.exit_code == 2
    assert "Unsupported database URL scheme" in result.output
