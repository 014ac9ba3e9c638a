"""Reading and tampering with audit rows in raw SQL, and recomputing chains without our code."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import rfc8785
from sqlalchemy import Connection, text

import tests.databases
from agentforge.store.engine import parse_database_url
from agentforge.store.migrate import run_with_connection


def owner_url(database_url: str) -> str:
    """The URL of a role that may read every tenant's rows and change audit rows: the schema's owner
    on Postgres; on SQLite (no roles) the database URL itself."""
    return tests.databases.owner_url_for(database_url) or database_url


async def run_sql(database_url: str, statement: str, **params: Any) -> list[dict[str, Any]]:
    """Run one raw statement as the owner and commit; the rows it returns, as dicts."""
    found: list[dict[str, Any]] = []

    def work(conn: Connection) -> None:
        result = conn.execute(text(statement), params)
        if result.returns_rows:
            found.extend(dict(row._mapping) for row in result)

    await asyncio.to_thread(run_with_connection, parse_database_url(owner_url(database_url)), work)
    return found


async def audit_rows(database_url: str, tenant_id: str) -> list[dict[str, Any]]:
    return await run_sql(
        database_url, "SELECT * FROM audit_log WHERE tenant_id = :tenant ORDER BY seq", tenant=tenant_id
    )


def recompute(rows: list[dict[str, Any]]) -> list[str]:
    """Each row's hash, chained from 64 zeros, straight from the documented rule."""
    hashes, prev = [], "0" * 64
    for row in rows:
        entry = {
            "tenant": row["tenant_id"],
            "seq": row["seq"],
            "id": row["id"],
            "time": row["time"],
            "actor": row["actor"],
            "action": row["action"],
            "sessionID": row["session_id"],
            "data": json.loads(row["data"]),
        }
        prev = hashlib.sha256(prev.encode() + rfc8785.dumps(entry)).hexdigest()
        hashes.append(prev)
    return hashes
