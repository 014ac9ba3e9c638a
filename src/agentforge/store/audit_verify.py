"""Verifying audit chains: recompute every row's hash from its stored fields and check the links.

A chain is walked in seq order one page at a time (memory stays bounded however long it is) and stops
at its first broken row: a seq that is not the previous one plus one (a row deleted or inserted), a
`prev_hash` that is not the previous row's `row_hash` (rows swapped or rechained), or a `row_hash`
that does not match the row's contents (a row edited). What no chain can show by itself: rows removed
from its end; compare the length with an earlier report for that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Connection, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from agentforge.store.audit import GENESIS_HASH, hashed_entry, record_from_row, row_hash, rows_after
from agentforge.store.engine import DatabaseTarget, parse_database_url, postgres_engine, sqlite_engine
from agentforge.store.schema import audit_log

PAGE: Final = 1000

_SET_TENANT = text("SELECT set_config('app.tenant_id', :tenant, true)")


@dataclass(frozen=True, slots=True)
class BrokenRow:
    seq: int
    id: str
    reason: str


@dataclass(frozen=True, slots=True)
class ChainReport:
    """One tenant's chain: its length (rows checked) and, if any, its first broken row."""

    tenant_id: str
    length: int
    broken: BrokenRow | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None


def verify(conn: Connection, tenant: str | None = None, *, page: int = PAGE) -> list[ChainReport]:
    """Check `tenant`'s chain, or every tenant's (in tenant order). On Postgres all tenants are only
    visible to the owner role; a single tenant is set as the transaction's tenant so its own role can
    read it under row-level security."""
    if tenant is not None:
        if conn.dialect.name == "postgresql":
            conn.execute(_SET_TENANT, {"tenant": tenant})
        return [verify_chain(conn, tenant, page=page)]
    return [verify_chain(conn, tenant_id, page=page) for tenant_id in _tenants(conn)]


def _tenants(conn: Connection) -> list[str]:
    query = select(audit_log.c.tenant_id).distinct().order_by(audit_log.c.tenant_id)
    return [str(tenant_id) for tenant_id in conn.execute(query).scalars()]


def verify_chain(conn: Connection, tenant_id: str, *, page: int = PAGE) -> ChainReport:
    expected_seq, prev_hash, length = 1, GENESIS_HASH, 0
    for row in _walk(conn, tenant_id, page):
        reason = _fault(row, expected_seq, prev_hash)
        if reason is not None:
            return ChainReport(tenant_id, length, BrokenRow(int(row.seq), str(row.id), reason))
        expected_seq, prev_hash, length = expected_seq + 1, row.row_hash, length + 1
    return ChainReport(tenant_id, length)


def _walk(conn: Connection, tenant_id: str, page: int) -> Iterator[Any]:
    after = 0
    while True:
        rows = rows_after(conn, tenant_id, after, page)
        yield from rows
        if len(rows) < page:
            return
        after = int(rows[-1].seq)


def _fault(row: Any, expected_seq: int, prev_hash: str) -> str | None:
    """Why `row` breaks the chain, or None."""
    if row.seq != expected_seq:
        return f"gap in seq: expected seq {expected_seq}, found seq {row.seq}"
    if row.prev_hash != prev_hash:
        return "prev_hash mismatch: it is not the previous row's row_hash"
    try:
        recomputed = row_hash(prev_hash, hashed_entry(record_from_row(row)))
    except ValueError as exc:  # data that is not a JSON object, or that has no canonical form
        return f"hash mismatch: unreadable data ({exc})"
    if recomputed != row.row_hash:
        return "hash mismatch: row_hash does not match the row's contents"
    return None


class AuditDatabaseError(Exception):
    """The database cannot be verified (missing, unreachable, or without an audit log)."""


def verify_database(url: str, tenant: str | None = None) -> list[ChainReport]:
    """Open `url` read-only and verify its chains in one snapshot. Blocking: for the CLI (or a thread).

    Postgres: every tenant's chain is only visible to the owner role (row-level security)."""
    try:
        target = parse_database_url(url)
    except ValueError as exc:
        raise AuditDatabaseError(str(exc)) from exc
    if target.dialect == "sqlite":
        return _verify_sqlite(target, tenant)
    return asyncio.run(_verify_postgres(target, tenant))


def _verify_sqlite(target: DatabaseTarget, tenant: str | None) -> list[ChainReport]:
    if not target.sqlite_path.is_file():
        raise AuditDatabaseError(f"no database at {target.sqlite_path}")
    # A plain BEGIN: a read snapshot that never holds up the server's writer.
    engine = sqlite_engine(target, pool_size=1, begin="BEGIN")
    try:
        with engine.connect() as conn, conn.begin():
            return _verify_on(conn, tenant)
    except SQLAlchemyError as exc:
        raise AuditDatabaseError(_first_line(exc)) from exc
    finally:
        engine.dispose()


async def _verify_postgres(target: DatabaseTarget, tenant: str | None) -> list[ChainReport]:
    engine = postgres_engine(target, pool_size=1)
    try:
        async with engine.connect() as conn:
            # One snapshot for every page, so rows committed meanwhile cannot shift the walk.
            await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                return await conn.run_sync(_verify_on, tenant)
    except (SQLAlchemyError, OSError) as exc:
        raise AuditDatabaseError(_first_line(exc)) from exc
    finally:
        await engine.dispose()


def _verify_on(conn: Connection, tenant: str | None) -> list[ChainReport]:
    if not inspect(conn).has_table(audit_log.name):
        raise AuditDatabaseError("this database has no audit log (start the server once to migrate it)")
    if tenant is None and not sees_every_tenant(conn):
        # Row-level security would hide every chain: "no audit entries" would be a false all-clear.
        raise AuditDatabaseError(
            "this database role cannot see every tenant's chain (row-level security): verify as the "
            "owner (database.owner_url, or --db with the owner's URL), or one tenant with --tenant"
        )
    return verify(conn, tenant)


_SEES_EVERY_TENANT = text(
    """
    SELECT r.rolsuper OR r.rolbypassrls OR pg_has_role(current_user, c.relowner, 'MEMBER')
    FROM pg_roles r, pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE r.rolname = current_user AND c.relname = 'audit_log' AND n.nspname = current_schema()
    """
)


def sees_every_tenant(conn: Connection) -> bool:
    """Whether this connection's role reads every tenant's rows: always on SQLite; on Postgres a
    superuser, a BYPASSRLS role, or the owner (the tables' maintenance policy is the owner's)."""
    if conn.dialect.name != "postgresql":
        return True
    return bool(conn.execute(_SEES_EVERY_TENANT).scalar())


def _first_line(exc: BaseException) -> str:
    lines = str(getattr(exc, "orig", None) or exc).splitlines()
    return lines[0] if lines else type(exc).__name__
