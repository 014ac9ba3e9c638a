"""The tenant of a Postgres transaction: `app.tenant_id`, which the row-level security policies read.

Migration 0006 makes every table visible and writable only for rows whose `tenant_id` equals the
setting. It is set with `set_config(..., true)`, i.e. for the current transaction only: a pooled
connection never carries one request's tenant into the next, and a transaction that did not set it
sees and writes nothing. SQLite has no such setting; its queries filter by `tenant_id` themselves.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import Connection, text

TENANT_SETTING: Final = "app.tenant_id"

_SET_TENANT = text(f"SELECT set_config('{TENANT_SETTING}', :tenant, true)")


def set_tenant(conn: Connection, tenant_id: str) -> None:
    """Scope the rest of `conn`'s current transaction (Postgres) to `tenant_id`."""
    if not tenant_id:
        # An empty setting matches no row, so writes would fail their WITH CHECK with a worse error.
        raise ValueError("a tenant id is required")
    conn.execute(_SET_TENANT, {"tenant": tenant_id})
