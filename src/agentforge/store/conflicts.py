"""INSERT statements that take ON CONFLICT clauses, in the connection's dialect.

SQLAlchemy has one per dialect. The Postgres one is imported when first asked for: its dialect
(~2.4 MB) is already loaded on a Postgres server and never needed on a SQLite one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Table
from sqlalchemy.dialects import sqlite

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql


def conflict_insert(dialect: str, table: Table) -> postgresql.Insert | sqlite.Insert:
    """`dialect`: the connection's (`conn.dialect.name`), "postgresql" or "sqlite"."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    return sqlite.insert(table)
