"""API key rows: sync functions over a Connection, every one scoped to one tenant.

Inserts and revocations run through `Store.mutate` (the writer's transaction, so an audit entry can
join it); lookups run on the readers. Roles are stored as a JSON list; only the secret's hash is kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, select, update

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


_COLUMNS = (
    api_key.c.id,
    api_key.c.tenant_id,
    api_key.c.name,
    api_key.c.roles,
    api_key.c.created_by,
    api_key.c.time_created,
    api_key.c.time_revoked,
    api_key.c.secret_hash,
)
# One key by id, built once: read on every authentication (through `Readers.rows`), see `key_params`.
KEY_BY_ID = select(*_COLUMNS).where(
    api_key.c.tenant_id == bindparam("b_tenant"), api_key.c.id == bindparam("b_key")
)


def key_params(tenant_id: str, key_id: str) -> dict[str, str]:
    return {"b_tenant": tenant_id, "b_key": key_id}


def key_from_rows(rows: Sequence[Sequence[Any]]) -> StoredApiKey | None:
    """The key of `KEY_BY_ID`'s rows, or None."""
    return _stored(rows[0]) if rows else None


def list_api_keys(conn: Connection, tenant_id: str) -> list[ApiKey]:
    """The tenant's keys, oldest first, revoked ones included."""
    rows = conn.execute(
        select(*_COLUMNS)
        .where(api_key.c.tenant_id == tenant_id)
        .order_by(api_key.c.time_created, api_key.c.id)
    )
    return [_stored(row).key for row in rows]


def find_api_key(conn: Connection, tenant_id: str, key_id: str) -> StoredApiKey | None:
    return key_from_rows(list(conn.execute(KEY_BY_ID, key_params(tenant_id, key_id))))


def _stored(row: Sequence[Any]) -> StoredApiKey:
    """A row of `_COLUMNS`, by position (a SQLAlchemy row or an asyncpg record)."""
    key_id, tenant_id, name, roles, created_by, time_created, time_revoked, secret_hash = row
    key = ApiKey(
        id=key_id,
        tenant=tenant_id,
        name=name,
        roles=frozenset(str(role) for role in orjson.loads(roles)),
        created_by=created_by,
        time_created=time_created,
        time_revoked=time_revoked,
    )
    return StoredApiKey(key, secret_hash)
