"""The audit log: one append-only hash chain per tenant (ARCHITECTURE "Tenancy, identity and governance").

Each row hashes its predecessor: `row_hash = sha256(prev_hash || canonical_json(entry))`, where
`prev_hash` is the previous row's `row_hash` as 64 lowercase hex characters (64 zeros for seq 1),
`||` is byte concatenation of that ASCII text with the canonical JSON (RFC 8785) of the hashed entry
`{tenant, seq, id, time, actor, action, sessionID, data}`, and hashes are lowercase hex. Anyone can
recompute a chain from the rows alone; `audit_verify.py` does.

`append` runs inside the caller's transaction (the store's writer), so an entry commits or rolls back
with the change it records. Writers of one tenant are serialised: on Postgres by a transaction-level
advisory lock on the tenant, on SQLite by the writer's `BEGIN IMMEDIATE`. The (tenant_id, seq)
primary key makes a fork impossible even without the lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import rfc8785
from sqlalchemy import Connection, Executable, bindparam, select, text

from agentforge.model import ids
from agentforge.store.direct import execute_rows
from agentforge.store.schema import audit_log

GENESIS_HASH: Final = "0" * 64
MAX_PAGE: Final = 1000

# Actions recorded from session events (audit_events.py) and by the server itself.
SESSION_CREATED: Final = "session.created"
SESSION_DELETED: Final = "session.deleted"
PROMPT_ACCEPTED: Final = "prompt.accepted"
TOOL_REQUESTED: Final = "tool.requested"
TOOL_EXECUTED: Final = "tool.executed"
PERMISSION_ASKED: Final = "permission.asked"
TOOL_APPROVED: Final = "tool.approved"
TOOL_DENIED: Final = "tool.denied"
CONFIG_LOADED: Final = "config.loaded"
AUTH_FAILED: Final = "auth.failed"
KEY_CREATED: Final = "key.created"
KEY_REVOKED: Final = "key.revoked"

# Two-key form: its key space never meets the single-key session locks (store/ownership.py). The
# writer's opening takes the same lock (batch.py), keyed by this class.
CHAIN_LOCK: Final = "agentforge.audit"
_LOCK_TENANT = text(
    f"SELECT pg_advisory_xact_lock(hashtext('{CHAIN_LOCK}'), hashtext(current_schema() || ':' || :tenant))"
)
_HEAD = (
    select(audit_log.c.seq, audit_log.c.row_hash)
    .where(audit_log.c.tenant_id == bindparam("b_tenant"))
    .order_by(audit_log.c.seq.desc())
    .limit(1)
)
_INSERT = audit_log.insert()
_COLUMNS = (
    audit_log.c.tenant_id,
    audit_log.c.seq,
    audit_log.c.id,
    audit_log.c.time,
    audit_log.c.actor,
    audit_log.c.action,
    audit_log.c.session_id,
    audit_log.c.data,
    audit_log.c.prev_hash,
    audit_log.c.row_hash,
)

# Where the rows of a chain's entries may go instead of an INSERT of their own (projector.Writes).
Defer = Callable[[Executable, list[dict[str, Any]]], None]

# The largest integer an IEEE-754 double holds exactly, which is all RFC 8785 numbers can be.
_SAFE_INTEGER: Final = 2**53 - 1


def now_ms() -> int:
    return int(time.time() * 1000)


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical JSON. RFC 8785 numbers are IEEE-754 doubles, so an integer beyond 2**53
    (which a model may well send) is written as its decimal string: exact, and stored data then has
    a canonical form in every RFC 8785 implementation, so anyone can recompute the hashes."""
    return rfc8785.dumps(_exact_integers(value))


def _exact_integers(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > _SAFE_INTEGER:
        return str(value)
    if isinstance(value, Mapping):
        return {key: _exact_integers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_exact_integers(item) for item in value]
    return value


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """The sha256 (hex) of a value's canonical JSON: how entries refer to data they must not hold
    (tool arguments, the effective config)."""
    return sha256_hex(canonical_json(value))


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """Something to record: who (`actor`) did what (`action`) in which tenant, with details in `data`
    (a JSON object; never secrets: digest them)."""

    tenant_id: str
    action: str
    actor: str
    data: Mapping[str, Any]
    session_id: str | None = None
    time: int = field(default_factory=now_ms)
    id: str = field(default_factory=lambda: ids.ascending("aud"))


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """A row of a chain: the entry, its place (`seq`) and its hashes."""

    tenant_id: str
    seq: int
    id: str
    time: int
    actor: str
    action: str
    session_id: str | None
    data: dict[str, Any]
    prev_hash: str
    row_hash: str

    def wire(self) -> dict[str, Any]:
        return {**hashed_entry(self), "prevHash": self.prev_hash, "rowHash": self.row_hash}


def hashed_entry(row: AuditRecord) -> dict[str, Any]:
    """The object whose canonical JSON is hashed into the row."""
    return {
        "tenant": row.tenant_id,
        "seq": row.seq,
        "id": row.id,
        "time": row.time,
        "actor": row.actor,
        "action": row.action,
        "sessionID": row.session_id,
        "data": row.data,
    }


def row_hash(prev_hash: str, entry: Mapping[str, Any]) -> str:
    return sha256_hex(prev_hash.encode("ascii") + canonical_json(entry))


def append(conn: Connection, entries: Iterable[AuditEntry]) -> list[AuditRecord]:
    """Chain and insert `entries` (in order) inside the caller's transaction; returns the rows."""
    return _chain_and_insert(conn, entries, {})


class ChainBuffer:
    """The entries of one writer transaction, chained and inserted per flush: one head read per tenant
    per transaction and one multi-row insert, instead of one of each per entry. The heads it read stay
    valid for the transaction (the chain lock, or SQLite's write lock, is held until it ends)."""

    def __init__(
        self, heads: Mapping[str, tuple[int, str]] | None = None, locked: Iterable[str] = ()
    ) -> None:
        """`heads`: chain heads already known for the transaction, checked when it opened (Postgres,
        `last_numbers.py`); `locked`: tenants whose chain lock it already holds."""
        self._pending: list[AuditEntry] = []
        self._heads: dict[str, tuple[int, str]] = dict(heads or {})
        self._locked = frozenset(locked)

    def add(self, entries: Iterable[AuditEntry]) -> None:
        self._pending.extend(entries)

    def flush(self, conn: Connection, defer: Defer | None = None) -> None:
        """Chain the pending entries and insert them, or hand their rows to `defer` to insert."""
        if self._pending:
            pending, self._pending = self._pending, []
            _chain_and_insert(conn, pending, self._heads, self._locked, defer)

    def forget_heads(self) -> None:
        """After something else appended in this transaction (a mutation): read the heads again."""
        self._heads.clear()

    def heads(self) -> dict[str, tuple[int, str]]:
        """The heads known now (read or appended in this transaction, or given)."""
        return dict(self._heads)


def _chain_and_insert(
    conn: Connection,
    entries: Iterable[AuditEntry],
    heads: dict[str, tuple[int, str]],
    locked: frozenset[str] = frozenset(),
    defer: Defer | None = None,
) -> list[AuditRecord]:
    records: list[AuditRecord] = []
    rows: list[dict[str, Any]] = []
    for entry in entries:
        tenant_id = entry.tenant_id
        seq, prev = heads.get(tenant_id) or _lock_and_read_head(conn, tenant_id, tenant_id in locked)
        record, data = _chained(entry, seq + 1, prev)
        records.append(record)
        rows.append(_row(record, data))
        heads[entry.tenant_id] = (record.seq, record.row_hash)
    if rows and defer is not None:
        defer(_INSERT, rows)
    elif rows:
        execute_rows(conn, _INSERT, rows)
    return records


def _lock_and_read_head(conn: Connection, tenant_id: str, locked: bool = False) -> tuple[int, str]:
    """The tenant's last (seq, row_hash), (0, zeros) for an empty chain; on Postgres after taking the
    tenant's lock (unless `locked`: taken already), held until the transaction ends, so no other
    writer reads the same head."""
    if conn.dialect.name == "postgresql" and not locked:
        conn.execute(_LOCK_TENANT, {"tenant": tenant_id})
    head = conn.execute(_HEAD, {"b_tenant": tenant_id}).one_or_none()
    return (0, GENESIS_HASH) if head is None else (int(head.seq), str(head.row_hash))


def lock_chains(conn: Connection, tenant_ids: Iterable[str]) -> None:
    """Take several tenants' chain locks up front, in one fixed (sorted) order: two writers whose
    batches touch the same tenants in different orders would otherwise deadlock on them."""
    if conn.dialect.name == "postgresql":
        for tenant_id in sorted(set(tenant_ids)):
            conn.execute(_LOCK_TENANT, {"tenant": tenant_id})


def _chained(entry: AuditEntry, seq: int, prev_hash: str) -> tuple[AuditRecord, str]:
    """The entry's record, and its data's canonical JSON (the stored text)."""
    # Stored as its canonical form: what is read back hashes exactly as what was written.
    text = canonical_json(dict(entry.data)).decode()
    data = orjson.loads(text)
    unhashed = AuditRecord(
        entry.tenant_id,
        seq,
        entry.id,
        entry.time,
        entry.actor,
        entry.action,
        entry.session_id,
        data,
        prev_hash,
        "",
    )
    return dataclasses.replace(unhashed, row_hash=row_hash(prev_hash, hashed_entry(unhashed))), text


def _row(record: AuditRecord, data: str) -> dict[str, Any]:
    """The record's row; `data`: its data's canonical JSON (made once, in `_chained`)."""
    return {
        "tenant_id": record.tenant_id,
        "seq": record.seq,
        "id": record.id,
        "time": record.time,
        "actor": record.actor,
        "action": record.action,
        "session_id": record.session_id,
        "data": data,
        "prev_hash": record.prev_hash,
        "row_hash": record.row_hash,
    }


# --- reads --------------------------------------------------------------------------------------------


def record_from_row(row: Any) -> AuditRecord:
    """A stored row as a record (raises ValueError when its `data` is not a JSON object)."""
    data = orjson.loads(row.data)
    if not isinstance(data, dict):
        raise ValueError("data is not a JSON object")
    return AuditRecord(
        row.tenant_id,
        int(row.seq),
        row.id,
        int(row.time),
        row.actor,
        row.action,
        row.session_id,
        data,
        row.prev_hash,
        row.row_hash,
    )


def rows_after(conn: Connection, tenant_id: str, after: int, limit: int) -> Sequence[Any]:
    """Raw rows of the tenant's chain with seq > `after`, oldest first (at most `limit`)."""
    query = (
        select(*_COLUMNS)
        .where(audit_log.c.tenant_id == tenant_id, audit_log.c.seq > after)
        .order_by(audit_log.c.seq)
        .limit(limit)
    )
    return conn.execute(query).all()


def entries_page(
    conn: Connection, tenant_id: str, *, after: int = 0, limit: int = 100
) -> tuple[list[AuditRecord], int | None]:
    """A page of the tenant's chain oldest first, and the `after` of the next page (None at the end)."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    rows = rows_after(conn, tenant_id, after, limit + 1)
    records = [record_from_row(row) for row in rows[:limit]]
    return records, (records[-1].seq if len(rows) > limit else None)


_LAST_CONFIG = (
    select(audit_log.c.data)
    .where(audit_log.c.tenant_id == bindparam("b_tenant"), audit_log.c.action == CONFIG_LOADED)
    .order_by(audit_log.c.seq.desc())
    .limit(1)
)


def record_config_loaded(
    conn: Connection, tenant_id: str, config_digest: str, sources: Sequence[str], *, actor: str
) -> AuditRecord | None:
    """Record `config.loaded` unless the last one recorded had the same digest (inside the caller's
    transaction; the tenant's lock is taken first so two servers starting together record it once)."""
    _lock_and_read_head(conn, tenant_id)
    last = conn.execute(_LAST_CONFIG, {"b_tenant": tenant_id}).scalar_one_or_none()
    if last is not None and orjson.loads(last).get("digest") == config_digest:
        return None
    entry = AuditEntry(tenant_id, CONFIG_LOADED, actor, {"digest": config_digest, "sources": list(sources)})
    return append(conn, [entry])[0]
