"""A change marker on messages and parts, so a loop step reads only what changed since its last read.

`session.history_revision` counts the writes to a session's messages and parts: every transaction
that writes some bumps it once and stamps the rows it writes (`message.revision`, `part.revision`)
with the new value; `session.history_trimmed` is the revision of the last delete among them. A
reader that knows a session's history at revision R reads the rows with `revision > R` (indexed) and
starts over when `history_trimmed` moved. Existing rows keep revision 0: a first read takes them all.

Revision ID: 0012_history_revision
Revises: 0011_cluster_state
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_history_revision"
down_revision: str | Sequence[str] | None = "0011_cluster_state"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COUNTERS = ("history_revision", "history_trimmed")
_MARKED = ("message", "part")


def upgrade() -> None:
    for name in _COUNTERS:
        op.add_column("session", sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))
    for table in _MARKED:
        op.add_column(table, sa.Column("revision", sa.BigInteger(), nullable=False, server_default="0"))
        # Led by the session, like the tables' other indexes: one led by `tenant_id` would tempt
        # SQLite's planner (no statistics) for queries that filter by tenant and a better column.
        op.create_index(f"ix_{table}_session_id_revision", table, ["session_id", "revision"])


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite >= 3.35), not batch mode: recreating `message` would cascade-delete
    # its parts.
    for table in _MARKED:
        op.drop_index(f"ix_{table}_session_id_revision", table_name=table)
        op.drop_column(table, "revision")
    for name in _COUNTERS:
        op.drop_column("session", name)
