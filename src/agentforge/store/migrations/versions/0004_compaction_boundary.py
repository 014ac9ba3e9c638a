"""The compaction boundary as a column, so a turn reads history from the last completed compaction.

`message.compaction_boundary` holds, on a finished summary assistant message without error, the id of
the compaction user message it answers (KERNEL 6.4 "completed"). A partial index over the few rows
that carry it finds a session's newest boundary without reading its history. Existing rows are
backfilled from their JSON in Python, in batches, so the same code runs on SQLite and Postgres.

Revision ID: 0004_compaction_boundary
Revises: 0003_permission_todo
Create Date: 2025-12-02
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson
import sqlalchemy as sa
from alembic import context, op

revision: str = "0004_compaction_boundary"
down_revision: str | Sequence[str] | None = "0003_permission_todo"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL_BATCH: Final = 500
INDEX_NAME: Final = "ix_message_compaction_boundary"
HAS_BOUNDARY_WHERE: Final = "compaction_boundary IS NOT NULL"

# A frozen view of the table as this revision knows it (the app's schema may move on).
_message = sa.table(
    "message",
    sa.column("id", sa.Text()),
    sa.column("role", sa.Text()),
    sa.column("data", sa.Text()),
    sa.column("compaction_boundary", sa.Text()),
)


def upgrade() -> None:
    op.add_column("message", sa.Column("compaction_boundary", sa.Text(), nullable=True))
    _backfill()
    op.create_index(
        INDEX_NAME,
        "message",
        ["session_id", "compaction_boundary"],
        sqlite_where=sa.text(HAS_BOUNDARY_WHERE),
        postgresql_where=sa.text(HAS_BOUNDARY_WHERE),
    )


def downgrade() -> None:
    op.drop_index(INDEX_NAME, table_name="message")
    # Plain DROP COLUMN (SQLite >= 3.35), not batch mode: recreating `message` would cascade-delete
    # its parts.
    op.drop_column("message", "compaction_boundary")


def _backfill() -> None:
    if context.is_offline_mode():
        raise RuntimeError("0004_compaction_boundary backfills rows in Python: run it online, not with --sql")
    conn = op.get_bind()
    # orjson writes `"summary":true` without spaces: a cheap pre-filter, each row is still parsed.
    select_batch = (
        sa.select(_message.c.id, _message.c.data)
        .where(
            _message.c.id > sa.bindparam("b_after"),
            _message.c.role == "assistant",
            _message.c.data.contains('"summary":true', autoescape=True),
        )
        .order_by(_message.c.id)
        .limit(BACKFILL_BATCH)
    )
    update_row = (
        sa.update(_message)
        .where(_message.c.id == sa.bindparam("b_id"))
        .values(compaction_boundary=sa.bindparam("b_boundary"))
    )
    after = ""
    while rows := conn.execute(select_batch, {"b_after": after}).all():
        updates = [
            {"b_id": row.id, "b_boundary": boundary}
            for row in rows
            if (boundary := _boundary_of(orjson.loads(row.data))) is not None
        ]
        if updates:
            conn.execute(update_row, updates)
        after = rows[-1].id


def _boundary_of(info: dict[str, Any]) -> str | None:
    """The projector's rule at this revision: a finished summary without error closes its parent."""
    if (
        info.get("role") == "assistant"
        and info.get("summary")
        and info.get("finish")
        and not info.get("error")
    ):
        parent: str = info["parentID"]
        return parent
    return None
