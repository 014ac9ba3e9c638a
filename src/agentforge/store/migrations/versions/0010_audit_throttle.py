"""Replicas share the refused-request audit throttle: one audit row per (tenant, peer, reason) a
window across all of them (store/refusals.py); row-level security as migration 0006 gives every table.

Revision ID: 0010_audit_throttle
Revises: 0009_replicas
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agentforge.store.policies import isolate_tenants

revision: str = "0010_audit_throttle"
down_revision: str | Sequence[str] | None = "0009_replicas"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "audit_throttle"


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("tenant_id", sa.Text(), primary_key=True),
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("written_at", sa.BigInteger(), nullable=False),
        sa.Column("suppressed", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_audit_throttle_written", _TABLE, ["tenant_id", "written_at"])
    if op.get_bind().dialect.name != "postgresql":
        return
    # As migration 0006 does for every table: the owner maintains, a tenant sees its own rows.
    isolate_tenants(op.execute, _TABLE)


def downgrade() -> None:
    op.drop_index("ix_audit_throttle_written", table_name=_TABLE)
    op.drop_table(_TABLE)
