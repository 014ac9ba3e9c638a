"""The tables (KERNEL 3): sessions, messages and parts as JSON rows, and the durable event log.

JSON columns are TEXT encoded with orjson: identical on SQLite and Postgres, and cheap to write.
Every table carries `tenant_id` from day one. The migrations (`0001_initial` to `0012_history_revision`)
create exactly this; a test checks that the two never drift apart.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    and_,
    literal_column,
)

metadata = MetaData()

session = Table(
    "session",
    metadata,
    Column("id", Text, primary_key=True),
    Column("tenant_id", Text, nullable=False),
    Column("parent_id", Text, nullable=True),
    Column("directory", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("time_created", BigInteger, nullable=False),
    Column("time_updated", BigInteger, nullable=False),
    # Running totals owned by the projector (sum of the session's step-finish parts).
    Column("cost", Double, nullable=False, default=0.0),
    Column("tokens_input", BigInteger, nullable=False, default=0),
    Column("tokens_output", BigInteger, nullable=False, default=0),
    Column("tokens_reasoning", BigInteger, nullable=False, default=0),
    Column("tokens_cache_read", BigInteger, nullable=False, default=0),
    Column("tokens_cache_write", BigInteger, nullable=False, default=0),
    Column("data", Text, nullable=False),
    # The change marker of the session's messages and parts (0012): bumped once by every transaction
    # that writes some, which stamps them with it; `history_trimmed` is the revision of the last delete.
    Column("history_revision", BigInteger, nullable=False, server_default="0"),
    Column("history_trimmed", BigInteger, nullable=False, server_default="0"),
    Index("ix_session_parent_id", "parent_id"),
    Index("ix_session_tenant_id_time_updated", "tenant_id", "time_updated"),
)

message = Table(
    "message",
    metadata,
    Column("id", Text, primary_key=True),
    Column("tenant_id", Text, nullable=False),
    Column(
        "session_id",
        Text,
        ForeignKey("session.id", ondelete="CASCADE", name="fk_message_session_id"),
        nullable=False,
    ),
    Column("time_created", BigInteger, nullable=False),
    Column("data", Text, nullable=False),
    # Copied from `data` by the projector so start-up can find turns a crash left running without
    # parsing every message: `info.role`, and `info.time.completed` (a user message's `time.created`,
    # so only assistant messages can ever be open).
    Column("role", Text, nullable=True),
    Column("time_completed", BigInteger, nullable=True),
    # On a finished summary assistant message without error: the id of the compaction user message
    # it answers (KERNEL 6.4). The loop reads history only from the session's newest one on.
    Column("compaction_boundary", Text, nullable=True),
    # The session's `history_revision` of the transaction that last wrote the row.
    Column("revision", BigInteger, nullable=False, server_default="0"),
    Index("ix_message_session_id_id", "session_id", "id"),
    Index("ix_message_session_id_revision", "session_id", "revision"),
)

# An assistant message still being written (or left so by a crash). A literal, not a bound parameter:
# SQLite only uses a partial index when the query repeats the index's terms verbatim.
OPEN_ASSISTANT_MESSAGE: ColumnElement[bool] = and_(
    message.c.role == literal_column("'assistant'"), message.c.time_completed.is_(None)
)
# Nearly every message is closed, so this index stays tiny; ordered by id for batched reads.
ix_message_open_assistant = Index(
    "ix_message_open_assistant", message.c.id, sqlite_where=OPEN_ASSISTANT_MESSAGE
)

# Only summary messages carry a boundary: a tiny index, read per turn for the newest boundary.
HAS_COMPACTION_BOUNDARY: ColumnElement[bool] = message.c.compaction_boundary.isnot(None)
ix_message_compaction_boundary = Index(
    "ix_message_compaction_boundary",
    message.c.session_id,
    message.c.compaction_boundary,
    sqlite_where=HAS_COMPACTION_BOUNDARY,
)


def declare_postgres_predicates() -> None:
    """Give the partial indexes their Postgres predicates (the same as SQLite's). Called when a
    Postgres engine is made, not here: naming `postgresql_where` loads SQLAlchemy's postgresql
    dialect (~2.4 MB), which a SQLite server never needs. Idempotent."""
    ix_message_open_assistant.dialect_kwargs["postgresql_where"] = OPEN_ASSISTANT_MESSAGE
    ix_message_compaction_boundary.dialect_kwargs["postgresql_where"] = HAS_COMPACTION_BOUNDARY


part = Table(
    "part",
    metadata,
    Column("id", Text, primary_key=True),
    Column("tenant_id", Text, nullable=False),
    Column(
        "message_id",
        Text,
        ForeignKey("message.id", ondelete="CASCADE", name="fk_part_message_id"),
        nullable=False,
    ),
    Column("session_id", Text, nullable=False),
    Column("time_created", BigInteger, nullable=False),
    Column("data", Text, nullable=False),
    Column("revision", BigInteger, nullable=False, server_default="0"),  # as `message.revision`
    Index("ix_part_message_id_id", "message_id", "id"),
    Index("ix_part_session_id_id", "session_id", "id"),
    Index("ix_part_session_id_revision", "session_id", "revision"),
)

# No foreign key to `session`: the log outlives deletions (a client replaying sees the delete).
event = Table(
    "event",
    metadata,
    Column("id", Text, primary_key=True),
    Column("tenant_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("type", Text, nullable=False),
    Column("data", Text, nullable=False),
    Column("time_created", BigInteger, nullable=False),
    # The event's place in its tenant's log (1, 2, ...): the ids of the tenant-wide stream (0007).
    Column("position", BigInteger, nullable=False),
    UniqueConstraint("session_id", "seq", name="uq_event_session_id_seq"),
    UniqueConstraint("tenant_id", "position", name="uq_event_tenant_id_position"),
)

# A permission request and, once decided, its decision (KERNEL 7.4): written by the projector from
# the durable `permission.asked` / `permission.replied` events, so the log can replay both.
# `status`: pending | approved | denied | expired; `decision`: once | always | reject | timeout |
# policy; `decided_by`: a user id, "deadline", "rule", "abort" or a plugin's name.
permission_request = Table(
    "permission_request",
    metadata,
    Column("id", Text, primary_key=True),
    Column("tenant_id", Text, nullable=False),
    Column(
        "session_id",
        Text,
        ForeignKey("session.id", ondelete="CASCADE", name="fk_permission_request_session_id"),
        nullable=False,
    ),
    Column("message_id", Text, nullable=True),
    Column("call_id", Text, nullable=True),
    Column("permission", Text, nullable=False),
    Column("patterns", Text, nullable=False),
    Column("always", Text, nullable=False),
    Column("metadata", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("decision", Text, nullable=True),
    Column("decided_by", Text, nullable=True),
    Column("feedback", Text, nullable=True),
    Column("time_created", BigInteger, nullable=False),
    Column("deadline", BigInteger, nullable=False),
    Column("time_decided", BigInteger, nullable=True),
    Index("ix_permission_request_session_id_id", "session_id", "id"),
)

# A session's todo list (one row per session, replaced on every `todo.updated`).
todo = Table(
    "todo",
    metadata,
    Column(
        "session_id",
        Text,
        ForeignKey("session.id", ondelete="CASCADE", name="fk_todo_session_id"),
        primary_key=True,
    ),
    Column("tenant_id", Text, nullable=False),
    Column("data", Text, nullable=False),
    Column("time_updated", BigInteger, nullable=False),
)

# An API key (issue: identity). The secret is never stored: only its SHA-256 (keys are 256-bit random,
# so a fast hash suffices). `roles` is a JSON list. A revoked key keeps its row (audit), with
# `time_revoked` set. The token a client sends names the tenant and this id (see identity/apikeys.py).
api_key = Table(
    "api_key",
    metadata,
    Column("id", Text, primary_key=True),
    Column("tenant_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("roles", Text, nullable=False),
    Column("secret_hash", Text, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("time_created", BigInteger, nullable=False),
    Column("time_revoked", BigInteger, nullable=True),
    Index("ix_api_key_tenant_id", "tenant_id"),
)

# The audit log: one append-only hash chain per tenant. `seq` counts from 1 within a tenant;
# `row_hash = sha256(prev_hash || canonical_json(entry))` (RFC 8785), hex; the first row's
# `prev_hash` is 64 zeros. The primary key makes a forked chain (two rows with one seq) impossible.
audit_log = Table(
    "audit_log",
    metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("id", Text, nullable=False),
    Column("time", BigInteger, nullable=False),
    Column("actor", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("session_id", Text, nullable=True),
    Column("data", Text, nullable=False),
    Column("prev_hash", Text, nullable=False),
    Column("row_hash", Text, nullable=False),
)

# Webhook deliveries (the log an admin reads): one row per notification and endpoint; `attempts`
# is the JSON list of tries, `payload` the signed body's JSON.
webhook_delivery = Table(
    "webhook_delivery",
    metadata,
    Column("id", Text, primary_key=True),
    Column("tenant_id", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("attempts", Text, nullable=False),
    Column("next_attempt", BigInteger, nullable=True),
    Column("time_created", BigInteger, nullable=False),
    Column("time_updated", BigInteger, nullable=False),
    Index("ix_webhook_delivery_tenant_created", "tenant_id", "time_created"),
    Index("ix_webhook_delivery_status", "status"),
)

# Signed gateway requests' nonces, shared by every replica so that a request cannot be replayed
# once per replica; a row outlives its signature's freshness window (`expires_at`, unix seconds)
# only until the next claim of its tenant purges it.
gateway_nonce = Table(
    "gateway_nonce",
    metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("nonce", Text, primary_key=True),
    Column("expires_at", BigInteger, nullable=False),
    Index("ix_gateway_nonce_expiry", "tenant_id", "expires_at"),
)

# `prompt_async` requests accepted (answered 204) and not yet run to their end: a replica that
# finds one whose session no replica runs (the accepting one died) runs it.
prompt_queue = Table(
    "prompt_queue",
    metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("message_id", Text, primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("time_created", BigInteger, nullable=False),
    Index("ix_prompt_queue_session", "tenant_id", "session_id"),
)

# The refused-request audit throttle shared by replicas (identity/failures.py keeps one per process):
# one row per (tenant, hash of peer and reason); `written_at` (ms) is when its last audit row was
# admitted, `suppressed` how many refusals were only counted since.
audit_throttle = Table(
    "audit_throttle",
    metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("written_at", BigInteger, nullable=False),
    Column("suppressed", BigInteger, nullable=False),
    Index("ix_audit_throttle_written", "tenant_id", "written_at"),
)

# Which replica runs which session (runtime/cluster.py): written when a replica takes a session's run
# lease, removed when it gives it back. A row counts only while the lease (an advisory lock) is held:
# `GET /session/status` ignores a dead replica's rows, and the failover pass removes them.
run_lease = Table(
    "run_lease",
    metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("session_id", Text, primary_key=True),
    Column("replica", Text, nullable=False),
    Column("time_acquired", BigInteger, nullable=False),
)

# The key replicas seal their notifications with (store/cluster.py), made by migration 0011. No
# tenant: only the runtime role may read it (privileges.py), never write it.
cluster_secret = Table(
    "cluster_secret",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", Text, nullable=False),
)
