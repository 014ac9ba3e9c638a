"""Database checks: reachable, migrated to head, row-level security on every table, a runtime role
that cannot bypass it, and every audit chain intact (and matching its signed checkpoints).

Each check is sync code over one SQLAlchemy `Connection` (run through `store.migrate.run_with_connection`,
off any event loop). Row-level security and role checks read the Postgres catalogue of the schema the
server's tables live in (`current_schema()`, which the URL's `?schema=` sets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from sqlalchemy import Connection, text

from agentforge.doctor.result import CheckResult, failed, passed, skipped
from agentforge.store.audit_checkpoints import Checkpoint
from agentforge.store.audit_verify import ChainReport, sees_every_tenant, verify
from agentforge.store.migrate import current_revision, head_revision
from agentforge.store.schema import metadata

# Tables without a tenant_id column still get RLS (read-only for the runtime role), no tenant policy.
# Tables with no tenant: the migrations' own, and the replicas' sealing key (migration 0011: row
# security forced, read by the runtime role alone; store/cluster.py).
_NON_TENANT_TABLES: Final = frozenset({"alembic_version", "cluster_secret"})

_TABLES = text(
    """
    SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
           pg_has_role(current_user, c.relowner, 'MEMBER') AS owned
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
    """
)
_TENANT_POLICIES = text(
    """
    SELECT tablename FROM pg_policies
    WHERE schemaname = current_schema()
      AND (coalesce(qual, '') LIKE '%app.tenant_id%' OR coalesce(with_check, '') LIKE '%app.tenant_id%')
    """
)
_ROLE = text(
    """
    SELECT r.rolname, r.rolsuper, r.rolbypassrls,
           pg_has_role(current_user, n.nspowner, 'MEMBER') AS owns_schema
    FROM pg_roles r, pg_namespace n
    WHERE r.rolname = current_user AND n.nspname = current_schema()
    """
)

Check = Callable[[Connection], CheckResult]


def check_reachable(conn: Connection) -> CheckResult:
    version = conn.execute(text("SELECT 1")).scalar()
    return passed("database reachable", f"{conn.dialect.name} answered" if version == 1 else "answered")


def check_migrations(conn: Connection) -> CheckResult:
    name = "migrations at head"
    current, head = current_revision(conn), head_revision()
    if current == head:
        return passed(name, f"revision {current}")
    return failed(name, f"database at {current or 'no revision'}, this server needs {head}")


def check_row_level_security(conn: Connection) -> CheckResult:
    name = "row-level security"
    if conn.dialect.name != "postgresql":
        return skipped(name, "SQLite has no row-level security; queries filter by tenant")
    rows = {row.relname: row for row in conn.execute(_TABLES)}
    expected = set(metadata.tables) | _NON_TENANT_TABLES
    problems = [f"{table} is missing" for table in sorted(expected - rows.keys())]
    with_policy = set(conn.execute(_TENANT_POLICIES).scalars())
    for table in sorted(expected & rows.keys()):
        row = rows[table]
        if not row.relrowsecurity:
            problems.append(f"{table}: not enabled")
        elif not row.relforcerowsecurity:
            problems.append(f"{table}: not forced")
        if table not in _NON_TENANT_TABLES and table not in with_policy:
            problems.append(f"{table}: no policy on app.tenant_id")
    if problems:
        return failed(name, "; ".join(problems))
    return passed(name, f"enabled and forced on {len(expected)} tables")


def check_runtime_role(conn: Connection) -> CheckResult:
    name = "runtime database role"
    if conn.dialect.name != "postgresql":
        return skipped(name, "SQLite has no roles")
    role = conn.execute(_ROLE).one()
    problems = []
    if role.rolsuper:
        problems.append("is a superuser")
    if role.rolbypassrls:
        problems.append("has BYPASSRLS")
    owned = sorted(row.relname for row in conn.execute(_TABLES) if row.owned)
    if owned:
        problems.append(f"owns {', '.join(owned)}")
    if role.owns_schema:
        problems.append("owns the schema")
    if problems:
        return failed(name, f"{role.rolname} " + ", ".join(problems))
    return passed(name, f"{role.rolname}: not superuser, not owner, no BYPASSRLS")


def check_audit_chains(conn: Connection, checkpoints: Sequence[Checkpoint] = ()) -> CheckResult:
    """Every chain intact, and still holding the heads the (signature-checked) checkpoints saw."""
    name = "audit chains"
    if not sees_every_tenant(conn):
        return failed(name, "cannot see every tenant's chain as this role: set database.owner_url")
    reports = verify(conn, checkpoints=checkpoints)
    broken = [report for report in reports if not report.ok]
    if broken:
        return failed(name, "; ".join(_describe(report) for report in broken))
    entries = sum(report.length for report in reports)
    anchored = f", matching {len(checkpoints)} checkpoint(s)" if checkpoints else ""
    return passed(name, f"{len(reports)} chain(s), {entries} entries verified{anchored}")


def audit_chains_check(checkpoints: Sequence[Checkpoint]) -> Check:
    """`check_audit_chains` against these checkpoints, in the shape the runner calls."""

    def check_audit_chains_(conn: Connection) -> CheckResult:
        return check_audit_chains(conn, checkpoints)

    check_audit_chains_.__name__ = check_audit_chains.__name__
    return check_audit_chains_


def _describe(report: ChainReport) -> str:
    assert report.broken is not None
    row = report.broken
    which = f"row seq {row.seq} ({row.id})" if row.id is not None else f"seq {row.seq}"
    return f"tenant {report.tenant_id}: {which} {row.reason}"


RUNTIME_CHECKS: Final[Sequence[Check]] = (
    check_migrations,
    check_row_level_security,
    check_runtime_role,
)
