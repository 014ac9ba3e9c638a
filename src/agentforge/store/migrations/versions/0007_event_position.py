"""A tenant-wide position for every event, so the tenant-wide stream can resume.

`event.position` numbers a tenant's events 1, 2, ... in commit order (the writer allocates it as it
allocates a session's `seq`); a unique index on (tenant_id, position) both orders resumes and catches
two writers taking the same number. Existing rows are numbered per tenant in id order (event ids
ascend with time), in Python and in batches, so the same code runs on SQLite and Postgres.

Revision ID: 0007_event_position
Revises: 0006_row_level_security
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import sqlalchemy as sa
from alembic import context, op

revision: str = "0007_event_position"
down_revision: str | Sequence[str] | None = "0006_row_level_security"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL_BATCH: Final = 500
CONSTRAINT_NAME: Final = "uq_event_tenant_id_position"

# A frozen view of the table as this revision knows it.
_event = sa.table(
    "event",
    sa.column("id", sa.Text()),
    sa.column("tenant_id", sa.Text()),
    sa.column("position", sa.BigInteger()),
)


def upgrade() -> None:
    op.add_column("event", sa.Column("position", sa.BigInteger(), nullable=True))
    _backfill()
    # Batch mode: SQLite cannot change a column's nullability in place (it copies `event`, which no
    # foreign key references); Postgres alters it directly.
    with op.batch_alter_table("event") as batch:
        batch.alter_column("position", existing_type=sa.BigInteger(), nullable=False)
        batch.create_unique_constraint(CONSTRAINT_NAME, ["tenant_id", "position"])


def downgrade() -> None:
    with op.batch_alter_table("event") as batch:
        batch.drop_constraint(CONSTRAINT_NAME, type_="unique")
        batch.drop_column("position")


def _backfill() -> None:
    if context.is_offline_mode():
        raise RuntimeError("0007_event_position numbers rows in Python: run it online, not with --sql")
    conn = op.get_bind()
    tenants = [row[0] for row in conn.execute(sa.select(_event.c.tenant_id).distinct())]
    page = (
        sa.select(_event.c.id)
        .where(_event.c.tenant_id == sa.bindparam("b_tenant"), _event.c.id > sa.bindparam("b_after"))
        .order_by(_event.c.id)
        .limit(BACKFILL_BATCH)
    )
    number = (
        sa.update(_event).where(_event.c.id == sa.bindparam("b_id")).values(position=sa.bindparam("b_pos"))
    )
    for tenant in tenants:
        after, position = "", 0
        while ids := [row[0] for row in conn.execute(page, {"b_tenant": tenant, "b_after": after})]:
            rows = [{"b_id": event_id, "b_pos": position + i} for i, event_id in enumerate(ids, start=1)]
            conn.execute(number, rows)
            position += len(ids)
            after = ids[-1]
