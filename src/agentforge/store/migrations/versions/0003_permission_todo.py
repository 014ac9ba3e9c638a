"""Permission requests with their decisions, and per-session todo lists.

Revision ID: 0003_permission_todo
Revises: 0002_message_open
Create Date: 2025-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_permission_todo"
down_revision: str | Sequence[str] | None = "0002_message_open"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "permission_request",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column(
            "session_id",
            sa.Text(),
            sa.ForeignKey("session.id", ondelete="CASCADE", name="fk_permission_request_session_id"),
            nullable=False,
        ),
        sa.Column("message_id", sa.Text(), nullable=True),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("permission", sa.Text(), nullable=False),
        sa.Column("patterns", sa.Text(), nullable=False),
        sa.Column("always", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("decision", sa.Text(), nullable=True),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("feedback", sa.Text(), nullable=True),
        sa.Column("time_created", sa.BigInteger(), nullable=False),
        sa.Column("deadline", sa.BigInteger(), nullable=False),
        sa.Column("time_decided", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_permission_request_session_id_id", "permission_request", ["session_id", "id"])

    op.create_table(
        "todo",
        sa.Column(
            "session_id",
            sa.Text(),
            sa.ForeignKey("session.id", ondelete="CASCADE", name="fk_todo_session_id"),
            primary_key=True,
        ),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("time_updated", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("todo")
    op.drop_index("ix_permission_request_session_id_id", table_name="permission_request")
    op.drop_table("permission_request")
