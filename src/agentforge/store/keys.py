"""API key rows: sync functions over a Connection, every one scoped to one tenant.

Inserts and revocations run through `Store.mutate` (the writer's transaction, so an audit entry can
join it); lookups run on the readers. Roles are stored as a JSON list; only the secret's hash is kept.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from sqlalchemy import Connection, Row, select, update

from agentforge.model.apikey import ApiKey, StoredApiKey
from agentforge.store.schema import api_key


def insert_api_key(conn: Connection, stored: StoredApiKey) -> ApiKey:
    key = stored.key
    conn.execute(
        api_key.insert().values(
            id=key.id,
            tenant_id=key.tenant,
            name=key.name,
            roles=orjson.dumps(sorted(key.roles)).decode(),
            secret_hash=stored.secret_hash,
            created_by=key.created_by,
            time_created=key.time_created,
            time_revoked=key.time_revoked,
        )
    )
    return key


def revoke_api_key(
    conn: Connection, tenant_id: str, key_id: str, *, now_ms: int | None = None
) -> ApiKey | None:
    """Mark the key revoked (keeping the first revocation time); None if the tenant has no such key."""
    when = now_ms if now_ms is not None else int(time.time() * 1000)
    conn.execute(
        update(api_key)
        .where(api_key.c.tenant_id == tenant_id, api_key.c.id == key_id, api_key.c.time_revoked.is_(None))
        .values(time_revoked=when)
    )
    found = find_api_key(conn, tenant_id, key_id)
    return found.key if found is not None else None


def list_api_keys(conn: Connection, tenant_id: str) -> list[ApiKey]:
    """The tenant's keys, oldest first, revoked ones included."""
    rows = conn.execute(
        select(api_key).where(api_key.c.tenant_id == tenant_id).order_by(api_key.c.time_created, api_key.c.id)
    )
    return [_stored(row).key for row in rows]


def find_api_key(conn: Connection, tenant_id: str, key_id: str) -> StoredApiKey | None:
    row = conn.execute(
        select(api_key).where(api_key.c.tenant_id == tenant_id, api_key.c.id == key_id)
    ).first()
    return _stored(row) if row is not None else None


def _stored(row: Row[Any]) -> StoredApiKey:
    roles = orjson.loads(row.roles)
    key = ApiKey(
        id=row.id,
        tenant=row.tenant_id,
        name=row.name,
        roles=frozenset(str(role) for role in roles),
        created_by=row.created_by,
        time_created=row.time_created,
        time_revoked=row.time_revoked,
    )
    return StoredApiKey(key, row.secret_hash)
