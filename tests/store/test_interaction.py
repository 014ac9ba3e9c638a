"""Interaction records: permission requests with their decisions, and todo lists, through the writer."""

from __future__ import annotations

from typing import Any

import pytest

from agentforge.model import events as ev
from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.store import Store, StoreWriteError
from tests.store.builders import new_session, now_ms, session_created, session_deleted

TENANT = "default"


def asked(session_id: str, request_id: str, **extra: Any) -> Event:
    created = now_ms()
    return Event(
        type=ev.PERMISSION_ASKED,
        properties={
            "id": request_id,
            "sessionID": session_id,
            "permission": "bash",
            "patterns": ["git status"],
            "metadata": {"note": 1},
            "always": ["git status *"],
            "tool": {"messageID": "msg_1", "callID": "call_1"},
            "time": {"created": created, "deadline": created + 300_000},
            **extra,
        },
        tenant_id=TENANT,
    )


def replied(session_id: str, request_id: str, **fields: Any) -> Event:
    return Event(
        type=ev.PERMISSION_REPLIED,
        properties={
            "sessionID": session_id,
            "requestID": request_id,
            "reply": "reject",
            "status": "denied",
            "decision": "reject",
            "decidedBy": "alice",
            "message": "use git log",
            "time": now_ms(),
            **fields,
        },
        tenant_id=TENANT,
    )


def todo_updated(session_id: str, todos: list[dict[str, Any]]) -> Event:
    return Event(type=ev.TODO_UPDATED, properties={"sessionID": session_id, "todos": todos}, tenant_id=TENANT)


async def test_asked_then_replied_is_stored_with_its_decision(store: Store, published: list[Event]) -> None:
    session = new_session()
    request_id = ids.ascending("per")
    await store.write(session_created(session))
    await store.write(asked(session.id, request_id))

    pending = await store.permission_request(TENANT, request_id)
    assert pending is not None
    assert (pending.status, pending.decision, pending.patterns) == ("pending", None, ["git status"])
    assert pending.tool is not None and pending.tool.call_id == "call_1"

    await store.write(replied(session.id, request_id))
    decided = await store.permission_request(TENANT, request_id)
    assert decided is not None
    assert (decided.status, decided.decision, decided.decided_by) == ("denied", "reject", "alice")
    assert decided.feedback == "use git log"
    assert decided.time.decided is not None
    # Both carry the session, so both got a seq in the session's log.
    kinds = [(e.type, e.seq) for e in published if e.type.startswith("permission.")]
    assert [k for k, _ in kinds] == [ev.PERMISSION_ASKED, ev.PERMISSION_REPLIED]
    assert all(seq is not None for _, seq in kinds)
    assert [e.type for e in await store.events_after(TENANT, session.id, 1)] == [
        ev.PERMISSION_ASKED,
        ev.PERMISSION_REPLIED,
    ]


async def test_requests_are_listed_per_session_and_decision_and_tenant(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    first, second = ids.ascending("per"), ids.ascending("per")
    await store.write(asked(session.id, first))
    await store.write(asked(session.id, second))
    await store.write(replied(session.id, second, reply="always", status="approved", decision="always"))

    assert [r.id for r in await store.permission_requests(TENANT, session.id)] == [first, second]
    assert [r.id for r in await store.permission_requests(TENANT, session.id, decision="always")] == [second]
    assert await store.permission_requests("other-tenant", session.id) == []
    assert await store.permission_request("other-tenant", first) is None


async def test_reply_to_an_unknown_request_is_dropped(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    with pytest.raises(StoreWriteError):
        await store.write(replied(session.id, "per_missing"))


async def test_todo_list_is_replaced_on_every_update(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    assert await store.todos(TENANT, session.id) == []

    first = [{"content": "write tests", "status": "pending", "priority": "high"}]
    await store.write(todo_updated(session.id, first))
    assert await store.todos(TENANT, session.id) == first

    second = [*first, {"content": "ship", "status": "in_progress", "priority": "low"}]
    await store.write(todo_updated(session.id, second))
    assert await store.todos(TENANT, session.id) == second
    assert await store.todos("other-tenant", session.id) == []


async def test_deleting_the_session_removes_its_records(store: Store) -> None:
    session = new_session()
    request_id = ids.ascending("per")
    await store.write(session_created(session))
    await store.write(asked(session.id, request_id))
    await store.write(todo_updated(session.id, [{"content": "x", "status": "pending", "priority": "low"}]))
    await store.write(session_deleted(session))

    assert await store.permission_request(TENANT, request_id) is None
    assert await store.todos(TENANT, session.id) == []
