"""Initial schema: session, message, part and the durable event log, all with tenant_id.

Revision ID: 0001_initial
Revises:
Create Date: 2025-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("parent_id", sa.Text(), nullable=True),
        sa.Column("directory", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("time_created", sa.BigInteger(), nullable=False),
        sa.Column("time_updated", sa.BigInteger(), nullable=False),
        sa.Column("cost", sa.Double(), nullable=False),
        sa.Column("tokens_input", sa.BigInteger(), nullable=False),
        sa.Column("tokens_output", sa.BigInteger(), nullable=False),
        sa.Column("tokens_reasoning", sa.BigInteger(), nullable=False),
        sa.Column("tokens_cache_read", sa.BigInteger(), nullable=False),
        sa.Column("tokens_cache_write", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_index("ix_session_parent_id", "session", ["parent_id"])
    op.create_index("ix_session_tenant_id_time_updated", "session", ["tenant_id", "time_updated"])

    op.create_table(
        "message",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column(
            "session_id",
            sa.Text(),
            sa.ForeignKey("session.id", ondelete="CASCADE", name="fk_message_session_id"),
            nullable=False,
        ),
        sa.Column("time_created", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_index("ix_message_session_id_id", "message", ["session_id", "id"])

    op.create_table(
        "part",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column(
            "message_id",
            sa.Text(),
            sa.ForeignKey("message.id", ondelete="CASCADE", name="fk_part_message_id"),
            nullable=False,
        ),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("time_created", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_index("ix_part_message_id_id", "part", ["message_id", "id"])
    op.create_index("ix_part_session_id_id", "part", ["session_id", "id"])

    op.create_table(
        "event",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("time_created", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint("session_id", "seq", name="uq_event_session_id_seq"),
    )


def downgrade() -> None:
    op.drop_table("event")
    op.drop_table("part")
    op.drop_table("message")
    op.drop_table("session")
