"""What the runtime role may do (Postgres): the owner migrates, the server runs as a lesser role.

The owner role owns the tables and runs the migrations; the server's role (the "runtime role") is
neither owner nor BYPASSRLS, so the row-level security policies of migration 0006 bind it. It gets
exactly: USAGE on the schema; SELECT, INSERT, UPDATE, DELETE on the data tables; SELECT, INSERT on
the append-only `audit_log`; SELECT on `alembic_version` (to check the revision) and on
`cluster_secret` (the key replicas seal their notifications with: no other role may read it, and
the server never changes it). Nothing else: no
ownership, no TRUNCATE (which row-level security does not cover), no DDL.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import Connection, text

from agentforge.store.schema import audit_log, cluster_secret, metadata

DATA_TABLE_PRIVILEGES: Final = "SELECT, INSERT, UPDATE, DELETE"
APPEND_ONLY_PRIVILEGES: Final = "SELECT, INSERT"
READ_ONLY_PRIVILEGES: Final = "SELECT"
VERSION_TABLE: Final = "alembic_version"

_CURRENT_USER = text("SELECT current_user")
_CURRENT_SCHEMA = text("SELECT current_schema()")


class RuntimeRoleError(ValueError):
    """The runtime role would be the owner: row-level security would not isolate tenants."""


def current_role(conn: Connection) -> str:
    role: str = conn.execute(_CURRENT_USER).scalar_one()
    return role


def grant_runtime_role(conn: Connection, role: str) -> None:
    """As the owner, on the connection's current schema: give `role` exactly the runtime privileges.

    Revokes first, so a role that was given more (by hand, or by an older version) ends up with
    exactly this list. Raises RuntimeRoleError when `role` is the connection's own role.
    """
    if role == current_role(conn):
        raise RuntimeRoleError(f"the runtime role {role!r} must not be the role that owns the tables")
    quote = conn.dialect.identifier_preparer.quote
    schema = conn.execute(_CURRENT_SCHEMA).scalar_one()
    grantee = quote(role)
    conn.execute(text(f"GRANT USAGE ON SCHEMA {quote(schema)} TO {grantee}"))
    for table in metadata.sorted_tables:
        privileges = DATA_TABLE_PRIVILEGES
        if table is audit_log:
            privileges = APPEND_ONLY_PRIVILEGES
        elif table is cluster_secret:
            privileges = READ_ONLY_PRIVILEGES
        _grant_exactly(conn, privileges, quote(table.name), grantee)
    _grant_exactly(conn, READ_ONLY_PRIVILEGES, quote(VERSION_TABLE), grantee)


def _grant_exactly(conn: Connection, privileges: str, table: str, grantee: str) -> None:
    conn.execute(text(f"REVOKE ALL ON TABLE {table} FROM {grantee}"))
    conn.execute(text(f"GRANT {privileges} ON TABLE {table} TO {grantee}"))
