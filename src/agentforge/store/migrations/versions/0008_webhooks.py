"""The webhook delivery log, under the same row-level security as every tenant table.

Revision ID: 0008_webhooks
Revises: 0007_event_position
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_webhooks"
down_revision: str | Sequence[str] | None = "0007_event_position"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "webhook_delivery"
_OF_TENANT = "tenant_id = current_setting('app.tenant_id', true)"
_TENANT_ROWS = f"USING ({_OF_TENANT}) WITH CHECK ({_OF_TENANT})"
_ANY_ROW = "USING (true) WITH CHECK (true)"


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Text(), nullable=False),
        sa.Column("next_attempt", sa.BigInteger(), nullable=True),
        sa.Column("time_created", sa.BigInteger(), nullable=False),
        sa.Column("time_updated", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_webhook_delivery_tenant_created", _TABLE, ["tenant_id", "time_created"])
    op.create_index("ix_webhook_delivery_status", _TABLE, ["status"])
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f'ALTER TABLE "{_TABLE}" ENABLE ROW LEVEL SECURITY')
    op.execute(f'ALTER TABLE "{_TABLE}" FORCE ROW LEVEL SECURITY')
    op.execute(f'CREATE POLICY owner_maintenance ON "{_TABLE}" FOR ALL TO CURRENT_USER {_ANY_ROW}')
    op.execute(f'CREATE POLICY tenant_isolation ON "{_TABLE}" FOR ALL {_TENANT_ROWS}')


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f'DROP POLICY tenant_isolation ON "{_TABLE}"')
        op.execute(f'DROP POLICY owner_maintenance ON "{_TABLE}"')
    op.drop_index("ix_webhook_delivery_status", table_name=_TABLE)
    op.drop_index("ix_webhook_delivery_tenant_created", table_name=_TABLE)
    op.drop_table(_TABLE)
