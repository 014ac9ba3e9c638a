"""Verifying audit chains: recompute every row's hash from its stored fields and check the links.

A chain is walked in seq order one page at a time (memory stays bounded however long it is) and stops
at its first broken row: a seq that is not the previous one plus one (a row deleted or inserted), a
`prev_hash` that is not the previous row's `row_hash` (rows swapped or rechained), or a `row_hash`
that does not match the row's contents (a row edited). What no chain can show by itself: rows removed
from its end, and a chain whose every hash was recomputed after an edit. Signed checkpoints
(audit_checkpoints.py) show both: given them, each checkpointed row must still be there with the
hash the checkpoint saw, and a tenant a checkpoint names must still have a chain.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from sqlalchemy import Connection, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from agentforge.store.audit import GENESIS_HASH, hashed_entry, record_from_row, row_hash, rows_after
from agentforge.store.audit_checkpoints import Checkpoint, Head, read_heads
from agentforge.store.engine import DatabaseTarget, parse_database_url, postgres_engine, sqlite_engine
from agentforge.store.schema import audit_log
from agentforge.store.tenancy import TENANT_SETTING

PAGE: Final = 1000
T = TypeVar("T")

_SET_TENANT = text(f"SELECT set_config('{TENANT_SETTING}', :tenant, true)")


@dataclass(frozen=True, slots=True)
class BrokenRow:
    seq: int
    id: str | None  # None: the row is gone (deleted from the end)
    reason: str


@dataclass(frozen=True, slots=True)
class ChainReport:
    """One tenant's chain: its length (rows checked), how many checkpointed heads it was compared
    with, and, if any, its first broken row."""

    tenant_id: str
    length: int
    broken: BrokenRow | None = None
    anchored: int = 0

    @property
    def ok(self) -> bool:
        return self.broken is None


@dataclass(frozen=True, slots=True)
class _Anchor:
    """A head a checkpoint saw: the chain must still hold `row_hash` at that seq."""

    row_hash: str
    time: int


Anchors = Mapping[int, Sequence[_Anchor]]


def _anchors(checkpoints: Sequence[Checkpoint]) -> dict[str, dict[int, list[_Anchor]]]:
    by_tenant: dict[str, dict[int, list[_Anchor]]] = {}
    for checkpoint in checkpoints:
        for tenant, head in checkpoint.heads.items():
            seen = by_tenant.setdefault(tenant, {}).setdefault(head.seq, [])
            seen.append(_Anchor(head.row_hash, checkpoint.time))
    return by_tenant


def verify(
    conn: Connection, tenant: str | None = None, *, page: int = PAGE, checkpoints: Sequence[Checkpoint] = ()
) -> list[ChainReport]:
    """Check `tenant`'s chain, or every tenant's (in tenant order), against `checkpoints` too. On
    Postgres all tenants are only visible to the owner role; a single tenant is set as the
    transaction's tenant so its own role can read it under row-level security."""
    anchors = _anchors(checkpoints)
    if tenant is not None:
        if conn.dialect.name == "postgresql":
            conn.execute(_SET_TENANT, {"tenant": tenant})
        return [verify_chain(conn, tenant, page=page, anchors=anchors.get(tenant, {}))]
    # A tenant a checkpoint names but the database no longer has lost its whole chain: check it too.
    tenants = sorted({*_tenants(conn), *anchors})
    return [
        verify_chain(conn, tenant_id, page=page, anchors=anchors.get(tenant_id, {})) for tenant_id in tenants
    ]


def _tenants(conn: Connection) -> list[str]:
    query = select(audit_log.c.tenant_id).distinct().order_by(audit_log.c.tenant_id)
    return [str(tenant_id) for tenant_id in conn.execute(query).scalars()]


def verify_chain(
    conn: Connection, tenant_id: str, *, page: int = PAGE, anchors: Anchors | None = None
) -> ChainReport:
    anchors = anchors or {}
    expected_seq, prev_hash, length = 1, GENESIS_HASH, 0
    for row in _walk(conn, tenant_id, page):
        reason = _fault(row, expected_seq, prev_hash) or _unlike_checkpoint(row, anchors)
        if reason is not None:
            return ChainReport(tenant_id, length, BrokenRow(int(row.seq), str(row.id), reason), len(anchors))
        expected_seq, prev_hash, length = expected_seq + 1, row.row_hash, length + 1
    beyond = [seq for seq in anchors if seq > length]
    if beyond:
        seq = max(beyond)
        seen = max(anchor.time for anchor in anchors[seq])
        reason = (
            f"rows deleted from the end: the chain ends at seq {length}, but the checkpoint of "
            f"{_when(seen)} saw seq {seq}"
        )
        return ChainReport(tenant_id, length, BrokenRow(seq, None, reason), len(anchors))
    return ChainReport(tenant_id, length, anchored=len(anchors))


def _unlike_checkpoint(row: Any, anchors: Anchors) -> str | None:
    """Why a row that chains correctly still breaks a checkpoint: it holds another hash there."""
    for anchor in anchors.get(int(row.seq), ()):
        if anchor.row_hash != row.row_hash:
            return (
                f"rewritten: row_hash differs from the one the checkpoint of {_when(anchor.time)} "
                "signed (rows were edited and the chain re-hashed)"
            )
    return None


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="seconds")


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


def verify_database(
    url: str, tenant: str | None = None, checkpoints: Sequence[Checkpoint] = ()
) -> list[ChainReport]:
    """Open `url` read-only and verify its chains in one snapshot, against `checkpoints` (already
    checked for their signatures) too. Blocking: for the CLI (or a thread).

    Postgres: every tenant's chain is only visible to the owner role (row-level security)."""

    def work(conn: Connection) -> list[ChainReport]:
        _check_readable(conn, every_tenant=tenant is None)
        return verify(conn, tenant, checkpoints=checkpoints)

    return read_database(url, work)


def heads_of_database(url: str) -> dict[str, Head]:
    """Every tenant's chain head, read in one snapshot (for a checkpoint). Blocking."""

    def work(conn: Connection) -> dict[str, Head]:
        _check_readable(conn, every_tenant=True)
        return read_heads(conn)

    return read_database(url, work)


def read_database(url: str, work: Callable[[Connection], T]) -> T:
    """Run `work` on a read-only snapshot of the database at `url` (AuditDatabaseError when it
    cannot be opened or read). Blocking."""
    try:
        target = parse_database_url(url)
    except ValueError as exc:
        raise AuditDatabaseError(str(exc)) from exc
    if target.dialect == "sqlite":
        return _read_sqlite(target, work)
    return asyncio.run(_read_postgres(target, work))


def _read_sqlite(target: DatabaseTarget, work: Callable[[Connection], T]) -> T:
    if not target.sqlite_path.is_file():
        raise AuditDatabaseError(f"no database at {target.sqlite_path}")
    # A plain BEGIN: a read snapshot that never holds up the server's writer.
    engine = sqlite_engine(target, pool_size=1, begin="BEGIN")
    try:
        with engine.connect() as conn, conn.begin():
            return work(conn)
    except SQLAlchemyError as exc:
        raise AuditDatabaseError(_first_line(exc)) from exc
    finally:
        engine.dispose()


async def _read_postgres(target: DatabaseTarget, work: Callable[[Connection], T]) -> T:
    engine = postgres_engine(target, pool_size=1)
    try:
        async with engine.connect() as conn:
            # One snapshot for every page, so rows committed meanwhile cannot shift the walk.
            await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                return await conn.run_sync(work)
    except (SQLAlchemyError, OSError) as exc:
        raise AuditDatabaseError(_first_line(exc)) from exc
    finally:
        await engine.dispose()


def _check_readable(conn: Connection, *, every_tenant: bool) -> None:
    if not inspect(conn).has_table(audit_log.name):
        raise AuditDatabaseError("this database has no audit log (start the server once to migrate it)")
    if every_tenant and not sees_every_tenant(conn):
        # Row-level security would hide every chain: "no audit entries" would be a false all-clear.
        raise AuditDatabaseError(
            "this database role cannot see every tenant's chain (row-level security): verify as the "
            "owner (database.owner_url, or --db with the owner's URL), or one tenant with --tenant"
        )


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
