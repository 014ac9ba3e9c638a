"""Tenant isolation enforced by Postgres itself, proven in raw SQL as the runtime role.

The store's own code is not involved: these statements are what a bug (a query that forgot its
tenant filter, a transaction that forgot its tenant) or an attacker with the runtime role's
credentials could send. Tenant A's rows exist in every table; the runtime role must not see them
without the tenant setting, nor as tenant B, nor write rows in A's name as B, nor rewrite the audit
log even as A. The last test checks the same isolation through every store read on both dialects
(on SQLite the queries' own tenant filters are all there is).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import pytest
from sqlalchemy import Table, func, select, text, update
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentforge.model import events as ev
from agentforge.model.events import Event
from agentforge.store import Store, parse_database_url
from agentforge.store.engine import postgres_engine
from agentforge.store.schema import (
    api_key,
    audit_log,
    event,
    message,
    part,
    permission_request,
    session,
    todo,
)
from agentforge.store.tenancy import TENANT_SETTING
from tests.databases import owner_url_for
from tests.store.builders import (
    message_updated,
    new_session,
    part_updated,
    session_created,
    text_part,
    user_message,
)

A: Final = "tenant-a"
B: Final = "tenant-b"
TENANT_TABLES: Final = (session, message, part, event, permission_request, todo, api_key)
ALL_TABLES: Final = (*TENANT_TABLES, audit_log)
# What the `owner` fixture seeds for tenant A (B has one row per table).
_ROWS_OF_A: Final = {t.name: 2 if t is session else 1 for t in ALL_TABLES}
_SET_TENANT = text(f"SELECT set_config('{TENANT_SETTING}', :tenant, true)")


def _rows(tenant: str, key: str) -> dict[Table, dict[str, Any]]:
    """One row per table for `tenant`, with ids derived from `key` (the message and part hang on
    that key's session)."""
    ses, msg = f"ses_{key}", f"msg_{key}"
    return {
        session: {
            "id": ses,
            "tenant_id": tenant,
            "directory": "/w",
            "title": "t",
            "time_created": 1,
            "time_updated": 1,
            "cost": 0.0,
            "tokens_input": 0,
            "tokens_output": 0,
            "tokens_reasoning": 0,
            "tokens_cache_read": 0,
            "tokens_cache_write": 0,
            "data": "{}",
        },
        message: {"id": msg, "tenant_id": tenant, "session_id": ses, "time_created": 1, "data": "{}"},
        part: {
            "id": f"prt_{key}",
            "tenant_id": tenant,
            "message_id": msg,
            "session_id": ses,
            "time_created": 1,
            "data": "{}",
        },
        event: {
            "id": f"evt_{key}",
            "tenant_id": tenant,
            "session_id": ses,
            "seq": 1,
            "type": "session.created",
            "data": "{}",
            "time_created": 1,
            "position": int(key.rsplit("-", 1)[-1]),
        },
        permission_request: {
            "id": f"per_{key}",
            "tenant_id": tenant,
            "session_id": ses,
            "permission": "bash",
            "patterns": "[]",
            "always": "[]",
            "metadata": "{}",
            "status": "pending",
            "time_created": 1,
            "deadline": 2,
        },
        todo: {"session_id": ses, "tenant_id": tenant, "data": "[]", "time_updated": 1},
        api_key: {
            "id": f"key_{key}",
            "tenant_id": tenant,
            "name": "k",
            "roles": "[]",
            "secret_hash": "0" * 64,
            "created_by": "test",
            "time_created": 1,
        },
        audit_log: {
            "tenant_id": tenant,
            "seq": int(key.rsplit("-", 1)[-1]),
            "id": f"aud_{key}",
            "time": 1,
            "actor": "test",
            "action": "test",
            "data": "{}",
            "prev_hash": "0" * 64,
            "row_hash": "1" * 64,
        },
    }


def _where_key(table: Table, row: dict[str, Any]) -> Any:
    """The row's primary key as a WHERE clause."""
    return [column == row[column.name] for column in table.primary_key.columns]


@pytest.fixture
async def postgres_url(database_url: str) -> str:
    if parse_database_url(database_url).dialect != "postgresql":
        pytest.skip("row-level security is a Postgres feature; SQLite is checked by the last test")
    return database_url


@pytest.fixture
async def runtime(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    engine = postgres_engine(parse_database_url(postgres_url), pool_size=1)
    yield engine
    await engine.dispose()


@pytest.fixture
async def owner(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    """The owning role, seeding tenant A's rows in every table (the maintenance policy lets it)."""
    owner_url = owner_url_for(postgres_url)
    assert owner_url is not None
    engine = postgres_engine(parse_database_url(owner_url), pool_size=1)
    async with engine.begin() as conn:
        for key, tenant in (("a-1", A), ("b-1", B)):
            for table, row in _rows(tenant, key).items():
                await conn.execute(table.insert().values(row))
        # A second session of A without a todo list, so a todo row for it is new.
        await conn.execute(session.insert().values(_rows(A, "a-2")[session]))
    yield engine
    await engine.dispose()


async def _count(conn: AsyncConnection, table: Table, *, of_tenant: str | None = None) -> int:
    query = select(func.count()).select_from(table)
    if of_tenant is not None:
        query = query.where(table.c.tenant_id == of_tenant)
    return int((await conn.execute(query)).scalar_one())


async def _as_tenant(conn: AsyncConnection, tenant: str) -> None:
    await conn.execute(_SET_TENANT, {"tenant": tenant})


async def test_without_the_tenant_setting_no_row_is_visible(owner: AsyncEngine, runtime: AsyncEngine) -> None:
    async with owner.connect() as conn:
        assert {t.name: await _count(conn, t, of_tenant=A) for t in ALL_TABLES} == _ROWS_OF_A
    async with runtime.connect() as conn:
        assert {t.name: await _count(conn, t) for t in ALL_TABLES} == dict.fromkeys(_ROWS_OF_A, 0)


async def test_another_tenant_sees_none_of_the_rows(owner: AsyncEngine, runtime: AsyncEngine) -> None:
    async with runtime.connect() as conn:
        await _as_tenant(conn, B)
        assert {t.name: await _count(conn, t, of_tenant=A) for t in ALL_TABLES} == {
            t.name: 0 for t in ALL_TABLES
        }
        assert {t.name: await _count(conn, t) for t in ALL_TABLES} == {t.name: 1 for t in ALL_TABLES}
    async with runtime.connect() as conn:
        await _as_tenant(conn, A)  # control: the rows are there for their own tenant
        assert {t.name: await _count(conn, t) for t in ALL_TABLES} == _ROWS_OF_A


async def _insert_fails(runtime: AsyncEngine, tenant: str, table: Table, row: dict[str, Any]) -> str | None:
    """Insert `row` as `tenant` (rolled back either way); the error message when it fails."""
    async with runtime.connect() as conn:
        await _as_tenant(conn, tenant)
        try:
            await conn.execute(table.insert().values(row))
        except DBAPIError as exc:
            return str(exc.orig)
        finally:
            await conn.rollback()
    return None


async def test_inserting_a_row_in_another_tenants_name_fails(
    owner: AsyncEngine, runtime: AsyncEngine
) -> None:
    # New rows of A's that only reference rows A already has (a foreign key check is not what fails).
    new = _rows(A, "a-2")
    new[message]["session_id"] = new[part]["session_id"] = "ses_a-1"
    new[part]["message_id"] = "msg_a-1"
    new[permission_request]["session_id"] = new[event]["session_id"] = "ses_a-1"
    new[event]["seq"] = 2
    del new[session]
    new[session] = _rows(A, "a-3")[session]

    for table, row in new.items():
        refused = await _insert_fails(runtime, B, table, row)
        assert refused is not None and "row-level security" in refused, table.name
        assert await _insert_fails(runtime, A, table, row) is None, table.name  # as A it is fine


async def test_another_tenant_can_neither_update_nor_delete_the_rows(
    owner: AsyncEngine, runtime: AsyncEngine
) -> None:
    rows = _rows(A, "a-1")
    async with runtime.connect() as conn:
        await _as_tenant(conn, B)
        for table in TENANT_TABLES:
            where = _where_key(table, rows[table])
            changed = await conn.execute(update(table).where(*where).values(tenant_id=B))
            assert changed.rowcount == 0, table.name
            assert (await conn.execute(table.delete().where(*where))).rowcount == 0, table.name
        # B cannot move its own rows to A either (WITH CHECK on the new row).
        with pytest.raises(DBAPIError, match="row-level security"):
            await conn.execute(update(session).where(session.c.id == "ses_b-1").values(tenant_id=A))
        await conn.commit()
    async with owner.connect() as conn:
        assert {t.name: await _count(conn, t, of_tenant=A) for t in TENANT_TABLES} == {
            t.name: 2 if t is session else 1 for t in TENANT_TABLES
        }


async def test_the_audit_log_is_append_only_for_its_own_tenant(
    owner: AsyncEngine, runtime: AsyncEngine
) -> None:
    own = _where_key(audit_log, _rows(A, "a-1")[audit_log])
    for statement in (update(audit_log).where(*own).values(actor="forged"), audit_log.delete().where(*own)):
        async with runtime.connect() as conn:
            await _as_tenant(conn, A)
            with pytest.raises(ProgrammingError, match="permission denied"):
                await conn.execute(statement)
    # Even if someone granted UPDATE and DELETE, there is no policy that lets a tenant use them.
    async with runtime.connect() as conn:
        runtime_role = (await conn.execute(text("SELECT current_user"))).scalar_one()
    async with owner.begin() as conn:
        await conn.execute(text(f'GRANT UPDATE, DELETE ON audit_log TO "{runtime_role}"'))
    async with runtime.connect() as conn:
        await _as_tenant(conn, A)
        assert (await conn.execute(update(audit_log).where(*own).values(actor="forged"))).rowcount == 0
        assert (await conn.execute(audit_log.delete().where(*own))).rowcount == 0
        assert (await conn.execute(select(audit_log.c.actor).where(*own))).scalar_one() == "test"


async def test_the_runtime_role_is_neither_owner_superuser_nor_bypassrls(
    owner: AsyncEngine, runtime: AsyncEngine
) -> None:
    async with runtime.connect() as conn:
        role = (
            await conn.execute(
                text(
                    "SELECT rolname, rolsuper, rolbypassrls, rolcreaterole FROM pg_roles"
                    " WHERE rolname = current_user"
                )
            )
        ).one()
        owners = set(
            (
                await conn.execute(
                    text("SELECT tableowner FROM pg_tables WHERE schemaname = current_schema()")
                )
            ).scalars()
        )
        with pytest.raises(ProgrammingError, match="permission denied"):
            await conn.execute(text("TRUNCATE session CASCADE"))
    assert (role.rolsuper, role.rolbypassrls, role.rolcreaterole) == (False, False, False)
    assert owners and role.rolname not in owners


async def test_every_table_forces_row_level_security_with_its_policies(
    owner: AsyncEngine, runtime: AsyncEngine
) -> None:
    async with runtime.connect() as conn:
        tables = {
            row.relname: (row.relrowsecurity, row.relforcerowsecurity)
            for row in await conn.execute(
                text(
                    "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class"
                    " WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'"
                )
            )
        }
        policies: dict[str, set[str]] = {}
        for row in await conn.execute(
            text("SELECT tablename, policyname FROM pg_policies WHERE schemaname = current_schema()")
        ):
            policies.setdefault(row.tablename, set()).add(row.policyname)
        revision = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar_one()
    # Every table of the schema, including any a later migration adds.
    assert {t.name for t in ALL_TABLES} | {"alembic_version"} <= set(tables)
    assert tables == dict.fromkeys(tables, (True, True))
    for name in tables:
        assert "owner_maintenance" in policies[name], name
        if name == "audit_log":
            assert policies[name] == {"owner_maintenance", "tenant_read", "tenant_append"}
        elif name == "alembic_version":
            assert policies[name] == {"owner_maintenance", "read_revision"}
        elif name == "cluster_secret":  # no tenant: only the runtime role was granted to read it
            assert policies[name] == {"owner_maintenance", "replica_read"}
        else:
            assert "tenant_isolation" in policies[name], name
    assert revision  # the runtime role reads the revision (and only that, see the grants)


async def test_the_tenant_setting_ends_with_its_transaction(owner: AsyncEngine, runtime: AsyncEngine) -> None:
    async with runtime.connect() as conn:
        await _as_tenant(conn, A)
        assert await _count(conn, session) == 2
        await conn.commit()
        # Same connection (as a pool would hand it out again), next transaction: nothing.
        assert await _count(conn, session) == 0
        assert (await conn.execute(text(f"SELECT current_setting('{TENANT_SETTING}', true)"))).scalar() in (
            None,
            "",
        )


async def test_the_owner_sees_every_tenant_without_a_setting(owner: AsyncEngine) -> None:
    async with owner.connect() as conn:
        assert await _count(conn, session) == 3
        assert await _count(conn, audit_log) == 2


# --- both dialects: no store read hands out another tenant's rows -------------------------------


async def test_no_store_read_finds_another_tenants_rows(store: Store) -> None:
    created = new_session()
    user = user_message(created.id)
    text_of_a = text_part(user, "secret of a")
    for item in (session_created(created, A), message_updated(user, A), part_updated(text_of_a, A)):
        await store.write(item)
    asked = Event(
        ev.PERMISSION_ASKED,
        {
            "id": "per_rls",
            "sessionID": created.id,
            "permission": "bash",
            "patterns": ["ls"],
            "always": [],
            "metadata": {},
            "time": {"created": 1, "deadline": 2},
        },
        session_id=created.id,
        tenant_id=A,
    )
    await store.write(asked)
    await store.write(
        Event(
            ev.TODO_UPDATED,
            {"sessionID": created.id, "todos": [{"id": "1"}]},
            session_id=created.id,
            tenant_id=A,
        )
    )

    reads: dict[str, Callable[[str], Awaitable[Any]]] = {
        "get_session": lambda t: store.get_session(t, created.id),
        "list_sessions": lambda t: store.list_sessions(t),
        "children": lambda t: store.children(t, created.parent_id or created.id),
        "get_message": lambda t: store.get_message(t, created.id, user.id),
        "list_messages": lambda t: store.list_messages(t, created.id),
        "history": lambda t: store.history(t, created.id),
        "history_since_compaction": lambda t: store.history_since_compaction(t, created.id),
        "get_part": lambda t: store.get_part(t, created.id, user.id, text_of_a.id),
        "events_after": lambda t: store.events_after(t, created.id, 0),
        "last_seq": lambda t: store.last_seq(t, created.id),
        "permission_request": lambda t: store.permission_request(t, "per_rls"),
        "permission_requests": lambda t: store.permission_requests(t, created.id),
        "todos": lambda t: store.todos(t, created.id),
    }
    as_b = {name: await read(B) for name, read in reads.items()}
    as_a = {name: await read(A) for name, read in reads.items()}

    nothing: tuple[object, ...] = (None, [], ([], None), 0)
    assert {name: value for name, value in as_b.items() if value not in nothing} == {}
    # Control: the same reads as A find A's rows (children has none to find).
    assert [name for name, value in as_a.items() if value in nothing] == ["children"]
