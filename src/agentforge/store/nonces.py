"""Gateway nonces shared by every process on the database: a signed request is accepted once."""

from __future__ import annotations

from sqlalchemy import Connection, delete

from agentforge.store.conflicts import conflict_insert
from agentforge.store.schema import gateway_nonce


def claim_nonce(conn: Connection, tenant_id: str, nonce: str, expires_at: int, now: int) -> bool:
    """Record the nonce; False when it was already recorded (a replay). Purges the tenant's
    expired nonces first: their requests are refused as stale before they reach this."""
    conn.execute(
        delete(gateway_nonce).where(gateway_nonce.c.tenant_id == tenant_id, gateway_nonce.c.expires_at < now)
    )
    row = {"tenant_id": tenant_id, "nonce": nonce, "expires_at": expires_at}
    insert = conflict_insert(conn.dialect.name, gateway_nonce).values(row)
    statement = insert.on_conflict_do_nothing().returning(gateway_nonce.c.nonce)
    return conn.execute(statement).first() is not None
