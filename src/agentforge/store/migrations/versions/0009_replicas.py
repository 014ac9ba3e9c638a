"""Several replicas on one database: the gateway nonces they share, and the queue of accepted
`prompt_async` requests (any replica runs one whose accepting replica died); row-level security as
migration 0006 gives every table.

Run leases and the cluster's channel need no table (advisory locks, LISTEN/NOTIFY).

Revision ID: 0009_replicas
Revises: 0008_webhooks
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agentforge.store.policies import isolate_tenants

revision: str = "0009_replicas"
down_revision: str | Sequence[str] | None = "0008_webhooks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "gateway_nonce"
_QUEUE = "prompt_queue"


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("tenant_id", sa.Text(), primary_key=True),
        sa.Column("nonce", sa.Text(), primary_key=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_gateway_nonce_expiry", _TABLE, ["tenant_id", "expires_at"])
    op.create_table(
        _QUEUE,
        sa.Column("tenant_id", sa.Text(), primary_key=True),
        sa.Column("message_id", sa.Text(), primary_key=True),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("time_created", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_prompt_queue_session", _QUEUE, ["tenant_id", "session_id"])
    if op.get_bind().dialect.name != "postgresql":
        return
    # As migration 0006 does for every table: the owner maintains, a tenant sees its own rows.
    for table in (_TABLE, _QUEUE):
        isolate_tenants(op.execute, table)


def downgrade() -> None:
    op.drop_index("ix_prompt_queue_session", table_name=_QUEUE)
    op.drop_table(_QUEUE)
    op.drop_index("ix_gateway_nonce_expiry", table_name=_TABLE)
    op.drop_table(_TABLE)
