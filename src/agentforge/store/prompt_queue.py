"""Accepted `prompt_async` requests until their run ends (see schema.prompt_queue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection, bindparam, delete, insert, select

from agentforge.store.direct import execute_or_hold
from agentforge.store.projector import Writes
from agentforge.store.schema import prompt_queue

_INSERT: Final = insert(prompt_queue)
_FINISH: Final = delete(prompt_queue).where(
    prompt_queue.c.tenant_id == bindparam("b_tenant_id"),
    prompt_queue.c.session_id == bindparam("b_session_id"),
    prompt_queue.c.message_id <= bindparam("b_through"),
)


@dataclass(frozen=True, slots=True)
class QueuedPrompt:
    """An accepted `prompt_async`'s entry, written with its user message (store/batch.EventGroup)."""

    message_id: str
    time_created: int


def enqueue(writes: Writes, tenant_id: str, session_id: str, queued: QueuedPrompt) -> None:
    row = {
        "tenant_id": tenant_id,
        "session_id": session_id,
        "message_id": queued.message_id,
        "time_created": queued.time_created,
    }
    writes.defer(_INSERT, row)


def finish(conn: Connection, tenant_id: str, session_id: str, through: str) -> None:
    """Forget the session's queued prompts up to message `through` (ids ascend with time): a run
    that handled it handled the earlier ones. Never appends to the audit chain: its mutation says so
    (`store.finishing_prompts`, may_audit). Held with the writer's message where it is held."""
    execute_or_hold(
        conn, _FINISH, {"b_tenant_id": tenant_id, "b_session_id": session_id, "b_through": through}
    )


def queued(conn: Connection, created_before: int, limit: int) -> list[tuple[str, str, str]]:
    """Across tenants (maintenance): (tenant, session, message) queued before `created_before`."""
    rows = conn.execute(
        select(prompt_queue.c.tenant_id, prompt_queue.c.session_id, prompt_queue.c.message_id)
        .where(prompt_queue.c.time_created < created_before)
        .order_by(prompt_queue.c.time_created)
        .limit(limit)
    )
    return [(row.tenant_id, row.session_id, row.message_id) for row in rows]
