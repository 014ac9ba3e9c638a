"""The tables (KERNEL 3): sessions, messages and parts as JSON rows, and the durable event log.

JSON columns are TEXT encoded with orjson: identical on SQLite and Postgres, and cheap to write.
Every table carries `tenant_id` from day one. Migration `0001_initial` creates exactly this; a test
checks that the two never drift apart.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
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
    Index("ix_message_session_id_id", "session_id", "id"),
)

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
    Index("ix_part_message_id_id", "message_id", "id"),
    Index("ix_part_session_id_id", "session_id", "id"),
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
    UniqueConstraint("session_id", "seq", name="uq_event_session_id_seq"),
)
