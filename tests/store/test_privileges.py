"""The runtime role's privileges (Postgres): exactly what the server needs, granted by the owner."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from agentforge.store import Store, parse_database_url
from agentforge.store.engine import postgres_engine
from agentforge.store.migrate import upgrade_to_head
from agentforge.store.privileges import RuntimeRoleError
from agentforge.store.schema import metadata
from tests.databases import OWNER_ROLE, RUNTIME_ROLE, owner_url_for
from tests.store.builders import new_session, session_created

_ALL_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
_EXPECTED = {
    **{table.name: {"SELECT", "INSERT", "UPDATE", "DELETE"} for table in metadata.sorted_tables},
    "audit_log": {"SELECT", "INSERT"},
    "alembic_version": {"SELECT"},
    "cluster_secret": {"SELECT"},
}


@pytest.fixture
async def owner(database_url: str) -> AsyncIterator[AsyncEngine]:
    owner_url = owner_url_for(database_url)
    if owner_url is None:
        pytest.skip("SQLite has no roles")
    engine = postgres_engine(parse_database_url(owner_url), pool_size=1)
    yield engine
    await engine.dispose()


async def _privileges_of(engine: AsyncEngine, role: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    async with engine.connect() as conn:
        for table in _EXPECTED:
            for privilege in _ALL_PRIVILEGES:
                granted = await conn.execute(
                    text("SELECT has_table_privilege(:role, :table, :privilege)"),
                    {"role": role, "table": table, "privilege": privilege},
                )
                if granted.scalar_one():
                    found.setdefault(table, set()).add(privilege)
        schema_usage = await conn.execute(
            text("SELECT has_schema_privilege(:role, current_schema(), 'USAGE')"), {"role": role}
        )
        creates = await conn.execute(
            text("SELECT has_schema_privilege(:role, current_schema(), 'CREATE')"), {"role": role}
        )
        found["<schema>"] = {"USAGE"} if schema_usage.scalar_one() else set()
        if creates.scalar_one():
            found["<schema>"].add("CREATE")
    return found


async def test_the_runtime_role_gets_exactly_its_privileges(owner: AsyncEngine) -> None:
    assert await _privileges_of(owner, RUNTIME_ROLE) == {**_EXPECTED, "<schema>": {"USAGE"}}


async def test_only_the_runtime_role_may_read_the_cluster_key(owner: AsyncEngine) -> None:
    # Any role may LISTEN and NOTIFY: the key that seals what replicas say is theirs alone.
    async with owner.connect() as conn:
        readers = await conn.execute(
            text(
                "SELECT grantee FROM information_schema.role_table_grants"
                " WHERE table_schema = current_schema() AND table_name = 'cluster_secret'"
                " AND grantee <> :owner"
            ),
            {"owner": OWNER_ROLE},
        )
        assert {row.grantee for row in readers} == {RUNTIME_ROLE}
        public = await conn.execute(text("SELECT has_table_privilege('public', 'cluster_secret', 'SELECT')"))
        assert public.scalar_one() is False
        keys = await conn.execute(text("SELECT length(key) FROM cluster_secret"))
        assert keys.scalars().all() == [64]  # one key, 32 random bytes in hex


async def test_granting_again_takes_back_what_was_given_by_hand(
    database_url: str, owner: AsyncEngine
) -> None:
    async with owner.begin() as conn:
        await conn.execute(text(f"GRANT TRUNCATE, UPDATE ON audit_log, session TO {RUNTIME_ROLE}"))

    store = await Store.open(database_url, owner_url=owner_url_for(database_url))
    try:
        session = new_session()
        await store.write(session_created(session))
        assert await store.get_session("default", session.id) == session
    finally:
        await store.close()

    assert await _privileges_of(owner, RUNTIME_ROLE) == {**_EXPECTED, "<schema>": {"USAGE"}}


async def test_the_owner_cannot_be_granted_as_the_runtime_role(database_url: str, owner: AsyncEngine) -> None:
    owner_url = owner_url_for(database_url)
    assert owner_url is not None
    with pytest.raises(RuntimeRoleError, match="must not be the role that owns the tables"):
        await asyncio.to_thread(upgrade_to_head, owner_url, runtime_role=OWNER_ROLE)


async def test_one_role_given_as_both_urls_migrates_without_grants(
    database_url: str, owner: AsyncEngine
) -> None:
    owner_url = owner_url_for(database_url)
    assert owner_url is not None
    store = await Store.open(owner_url, owner_url=owner_url)
    try:
        session = new_session()
        await store.write(session_created(session))
        assert await store.get_session("default", session.id) == session
    finally:
        await store.close()


async def test_an_owner_url_must_match_the_database(database_url: str, tmp_path: Path) -> None:
    owner_url = owner_url_for(database_url)
    if owner_url is None:
        with pytest.raises(ValueError, match="only applies to Postgres"):
            await Store.open(database_url, owner_url=f"sqlite:///{tmp_path / 'other.db'}")
        return
    other_schema = owner_url.replace("schema=", "schema=x")
    with pytest.raises(ValueError, match="names schema"):
        await Store.open(database_url, owner_url=other_schema)
    with pytest.raises(ValueError, match="must be a Postgres URL"):
        await Store.open(database_url, owner_url=f"sqlite:///{tmp_path / 'other.db'}")
