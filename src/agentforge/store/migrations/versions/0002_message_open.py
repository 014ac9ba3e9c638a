"""Message role and completion time as columns, and a partial index on open assistant messages.

Start-up uses them to find the turns a crash left running. Existing rows are backfilled from their
JSON in Python, in batches, so the same code runs on SQLite and Postgres.

Revision ID: 0002_message_open
Revises: 0001_initial
Create Date: 2025-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson
import sqlalchemy as sa
from alembic import context, op

revision: str = "0002_message_open"
down_revision: str | Sequence[str] | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL_BATCH: Final = 500
INDEX_NAME: Final = "ix_message_open_assistant"
OPEN_ASSISTANT_WHERE: Final = "role = 'assistant' AND time_completed IS NULL"

# A frozen view of the table as this revision knows it (the app's schema may move on).
_message = sa.table(
    "message",
    sa.column("id", sa.Text()),
    sa.column("data", sa.Text()),
    sa.column("role", sa.Text()),
    sa.column("time_completed", sa.BigInteger()),
)


def upgrade() -> None:
    op.add_column("message", sa.Column("role", sa.Text(), nullable=True))
    op.add_column("message", sa.Column("time_completed", sa.BigInteger(), nullable=True))
    _backfill()
    op.create_index(
        INDEX_NAME,
        "message",
        ["id"],
        sqlite_where=sa.text(OPEN_ASSISTANT_WHERE),
        postgresql_where=sa.text(OPEN_ASSISTANT_WHERE),
    )


def downgrade() -> None:
    op.drop_index(INDEX_NAME, table_name="message")
    # Plain DROP COLUMN (SQLite >= 3.35), not batch mode: recreating `message` would cascade-delete
    # its parts.
    op.drop_column("message", "time_completed")
    op.drop_column("message", "role")


def _backfill() -> None:
    if context.is_offline_mode():
        raise RuntimeError("0002_message_open backfills rows in Python: run it online, not with --sql")
    conn = op.get_bind()
    select_batch = (
        sa.select(_message.c.id, _message.c.data)
        .where(_message.c.id > sa.bindparam("b_after"))
        .order_by(_message.c.id)
        .limit(BACKFILL_BATCH)
    )
    update_row = (
        sa.update(_message)
        .where(_message.c.id == sa.bindparam("b_id"))
        .values(role=sa.bindparam("b_role"), time_completed=sa.bindparam("b_time_completed"))
    )
    after = ""
    while rows := conn.execute(select_batch, {"b_after": after}).all():
        conn.execute(update_row, [_columns_of(row.id, orjson.loads(row.data)) for row in rows])
        after = rows[-1].id


def _columns_of(message_id: str, info: dict[str, Any]) -> dict[str, Any]:
    """The projector's rule at this revision: a user message counts as completed when created."""
    role = info["role"]
    time = info["time"]
    completed = time.get("completed") if role == "assistant" else time["created"]
    return {"b_id": message_id, "b_role": role, "b_time_completed": completed}
