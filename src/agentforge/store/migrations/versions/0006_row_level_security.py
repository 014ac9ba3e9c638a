"""Tenant isolation enforced by Postgres: row-level security on every table.

Every table gets ENABLE and FORCE ROW LEVEL SECURITY (FORCE: the owner is subject to it too) and a
policy on the transaction's tenant setting `app.tenant_id` (see store/tenancy.py), for reading
(USING) and for writing (WITH CHECK): a transaction that did not set it sees and writes nothing.
`audit_log` is append-only: its tenant may only read and insert, so even a granted UPDATE or DELETE
changes no row. `alembic_version` is readable by all (the runtime role checks the revision).

`owner_maintenance` lets the role running this migration (CURRENT_USER, the owner; never the
runtime role) see and change every row: start-up recovery across tenants, `audit verify`, and later
data migrations. A later migration that adds a table must give it the same policies (the store's
row-level security test checks every table of the schema).

SQLite has no row-level security: there the queries' own `tenant_id` filters isolate tenants.

Revision ID: 0006_row_level_security
Revises: 0005_identity_audit
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from agentforge.store.policies import OF_TENANT, TENANT_ROWS, force_row_security

revision: str = "0006_row_level_security"
down_revision: str | Sequence[str] | None = "0005_identity_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies: what this revision protects, whatever later code calls these tables.
_TENANT_TABLES = ("session", "message", "part", "event", "permission_request", "todo", "api_key")
_APPEND_ONLY_TABLE = "audit_log"
_VERSION_TABLE = "alembic_version"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in (*_TENANT_TABLES, _APPEND_ONLY_TABLE, _VERSION_TABLE):
        force_row_security(op.execute, table)
    for table in _TENANT_TABLES:
        op.execute(f'CREATE POLICY tenant_isolation ON "{table}" FOR ALL {TENANT_ROWS}')
    op.execute(f'CREATE POLICY tenant_read ON "{_APPEND_ONLY_TABLE}" FOR SELECT USING ({OF_TENANT})')
    op.execute(f'CREATE POLICY tenant_append ON "{_APPEND_ONLY_TABLE}" FOR INSERT WITH CHECK ({OF_TENANT})')
    op.execute(f'CREATE POLICY read_revision ON "{_VERSION_TABLE}" FOR SELECT USING (true)')


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f'DROP POLICY read_revision ON "{_VERSION_TABLE}"')
    op.execute(f'DROP POLICY tenant_append ON "{_APPEND_ONLY_TABLE}"')
    op.execute(f'DROP POLICY tenant_read ON "{_APPEND_ONLY_TABLE}"')
    for table in _TENANT_TABLES:
        op.execute(f'DROP POLICY tenant_isolation ON "{table}"')
    for table in (*_TENANT_TABLES, _APPEND_ONLY_TABLE, _VERSION_TABLE):
        op.execute(f'DROP POLICY owner_maintenance ON "{table}"')
        op.execute(f'ALTER TABLE "{table}" NO FORCE ROW LEVEL SECURITY')
        op.execute(f'ALTER TABLE "{table}" DISABLE ROW LEVEL SECURITY')
