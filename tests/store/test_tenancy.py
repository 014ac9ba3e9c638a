"""`set_tenant`: the Postgres setting row-level security reads, for one transaction only."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Connection, text

from agentforge.store import parse_database_url
from agentforge.store.migrate import run_with_connection
from agentforge.store.tenancy import TENANT_SETTING, set_tenant

_CURRENT = text(f"SELECT current_setting('{TENANT_SETTING}', true)")


def test_an_empty_tenant_is_refused_before_any_statement() -> None:
    with pytest.raises(ValueError, match="a tenant id is required"):
        set_tenant(None, "")  # type: ignore[arg-type]  # no connection is touched


async def test_the_setting_lasts_for_its_transaction_only(database_url: str) -> None:
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip("SQLite has no settings: its queries filter by tenant")
    seen: list[str | None] = []

    def within_and_after(conn: Connection) -> None:
        with conn.begin():
            set_tenant(conn, "tenant-a")
            seen.append(conn.execute(_CURRENT).scalar())
        with conn.begin():
            seen.append(conn.execute(_CURRENT).scalar() or None)

    await asyncio.to_thread(run_with_connection, target, within_and_after)

    assert seen == ["tenant-a", None]
