"""Replicas: who runs which session (`run_lease`, for `GET /session/status` on every replica) and
the key their notifications are sealed with (`cluster_secret`, readable by the runtime role alone).

`run_lease` gets the tenant policies every table has. `cluster_secret` has no tenant: the owner
maintains it and whoever was granted SELECT reads it (the runtime role only, privileges.py); other
roles that can connect to the database may NOTIFY the replicas' channel but cannot read the key, so
they can neither forge nor read what the replicas say (store/cluster.py). SQLite runs one process:
the tables exist there too (one schema for both dialects) but no key is made.

Revision ID: 0011_cluster_state
Revises: 0010_audit_throttle
Create Date: 2026-12-01
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agentforge.store.policies import force_row_security, isolate_tenants

revision: str = "0011_cluster_state"
down_revision: str | Sequence[str] | None = "0010_audit_throttle"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LEASES = "run_lease"
_SECRET = "cluster_secret"


def upgrade() -> None:
    op.create_table(
        _LEASES,
        sa.Column("tenant_id", sa.Text(), primary_key=True),
        sa.Column("session_id", sa.Text(), primary_key=True),
        sa.Column("replica", sa.Text(), nullable=False),
        sa.Column("time_acquired", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        _SECRET,
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.Text(), nullable=False),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    isolate_tenants(op.execute, _LEASES)
    force_row_security(op.execute, _SECRET)
    op.execute(f'CREATE POLICY replica_read ON "{_SECRET}" FOR SELECT USING (true)')
    op.get_bind().execute(
        sa.text(f'INSERT INTO "{_SECRET}" (id, key) VALUES (1, :key)'), {"key": secrets.token_hex(32)}
    )


def downgrade() -> None:
    op.drop_table(_SECRET)
    op.drop_table(_LEASES)
