"""The audit hash chain: appended in the writer's transactions, derived from session events on
transitions only, verifiable by anyone, and tamper-evident; one chain per tenant, never forked."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import pytest
import rfc8785
from sqlalchemy import Connection

from agentforge.model import events as ev
from agentforge.model import ids
from agentforge.model.events import Event
from agentforge.model.part import (
    CompletedTime,
    RunningTime,
    ToolPart,
    ToolStateCompleted,
    ToolStatePending,
    ToolStateRunning,
)
from agentforge.model.session import Session
from agentforge.store import Store, StoreWriteError
from agentforge.store.audit import canonical_json
from agentforge.store.audit_events import may_audit
from agentforge.store.audit_verify import ChainReport, verify_chain, verify_database
from agentforge.store.engine import parse_database_url
from agentforge.store.migrate import run_with_connection
from tests.store.audit_helpers import audit_rows, owner_url, recompute, run_sql
from tests.store.builders import (
    assistant_message,
    message_removed,
    message_updated,
    new_session,
    now_ms,
    part_updated,
    session_created,
    session_deleted,
    text_part,
    user_message,
)
from tests.store.test_interaction import asked, replied

TENANT = "default"


async def actions(store: Store, tenant_id: str = TENANT) -> list[tuple[str, str]]:
    entries, _ = await store.audit_entries(tenant_id, limit=1000)
    return [(entry.action, entry.actor) for entry in entries]


def verify(database_url: str, tenant: str | None = None) -> Any:
    return asyncio.to_thread(verify_database, owner_url(database_url), tenant)


# --- the chain --------------------------------------------------------------------------------------


async def test_chain_hashes_recompute_independently(store: Store, database_url: str) -> None:
    data: list[dict[str, Any]] = [
        {"keyID": "key_1", "roles": ["admin"], "note": "é ☃ \u2028", "ratio": 0.1, "n": 2**60},
        {"nested": {"b": [1, 2.5, None, True], "a": "x"}},
        {},
    ]
    for index, item in enumerate(data):
        await store.record_audit("t1", f"test.{index}", actor="alice", data=item)
    await store.record_audit("t2", "test.other", actor="bob", session_id="ses_1", data={"x": 1})

    rows = await audit_rows(database_url, "t1")
    assert [row["seq"] for row in rows] == [1, 2, 3]
    assert rows[0]["prev_hash"] == "0" * 64
    assert [row["row_hash"] for row in rows] == recompute(rows)
    assert [row["prev_hash"] for row in rows[1:]] == [row["row_hash"] for row in rows[:-1]]
    assert all(ids.has_prefix(row["id"], "aud") for row in rows)
    [other] = await audit_rows(database_url, "t2")
    assert (other["seq"], other["prev_hash"], other["session_id"]) == (1, "0" * 64, "ses_1")
    assert [other["row_hash"]] == recompute([other])

    reports = await verify(database_url)
    assert [(r.tenant_id, r.length, r.ok) for r in reports] == [("t1", 3, True), ("t2", 1, True)]
    assert [(r.tenant_id, r.length) for r in await verify(database_url, "t2")] == [("t2", 1)]


async def test_the_record_comes_back_as_read(store: Store) -> None:
    written = await store.record_audit("t1", "key.created", actor="alice", data={"big": 2**60, "f": 1.5})
    entries, following = await store.audit_entries("t1")
    assert entries == [written] and following is None
    wire = written.wire()
    assert set(wire) == {
        "tenant",
        "seq",
        "id",
        "time",
        "actor",
        "action",
        "sessionID",
        "data",
        "prevHash",
        "rowHash",
    }
    # Beyond 2**53 an integer is kept exactly as a string (RFC 8785 numbers are doubles).
    assert canonical_json(wire["data"]) == b'{"big":"1152921504606846976","f":1.5}'


async def test_pages_oldest_first(store: Store) -> None:
    for index in range(5):
        await store.record_audit(TENANT, "test", actor="a", data={"i": index})
    first, after = await store.audit_entries(TENANT, limit=2)
    second, after2 = await store.audit_entries(TENANT, after=after or 0, limit=2)
    third, end = await store.audit_entries(TENANT, after=after2 or 0, limit=2)
    assert [[e.seq for e in page] for page in (first, second, third)] == [[1, 2], [3, 4], [5]]
    assert (after, after2, end) == (2, 4, None)
    with pytest.raises(ValueError, match="limit"):
        await store.audit_entries(TENANT, limit=1001)


# --- entries derived from session events ----------------------------------------------------------------


def tool_part(message_id: str, session_id: str, part_id: str, state: Any) -> ToolPart:
    return ToolPart(
        id=part_id, session_id=session_id, message_id=message_id, call_id="call_1", tool="bash", state=state
    )


def tool_updates(session_id: str, message_id: str, args: dict[str, Any]) -> list[Event]:
    """One tool call through pending, running (twice: metadata), completed, and completed again
    (its output compacted later): five writes of one part."""
    part_id = ids.ascending("prt")
    start = now_ms()
    running = ToolStateRunning(input=args, time=RunningTime(start=start))
    done = CompletedTime(start=start, end=start + 5)
    completed = ToolStateCompleted(input=args, output="ok", title="t", metadata={}, time=done)
    compacted = completed.model_copy(update={"time": done.model_copy(update={"compacted": start + 9})})
    states = [
        ToolStatePending(),
        running,
        running.model_copy(update={"metadata": {"output": "partial"}}),
        completed,
        compacted,
    ]
    return [tool_event(tool_part(message_id, session_id, part_id, state)) for state in states]


def tool_event(part: ToolPart) -> Event:
    props = {"sessionID": part.session_id, "part": part.wire(), "time": now_ms()}
    return Event(ev.PART_UPDATED, props, session_id=part.session_id, tenant_id=TENANT)


def scripted_turn(args: dict[str, Any]) -> tuple[list[Event], str]:
    """A session, a prompt, a tool call asked and approved, a reply, and the session deleted twice."""
    session = new_session()
    user = user_message(session.id)
    assistant = assistant_message(session.id, user.id)
    request_id = ids.ascending("per")
    text = text_part(assistant, "Running it")
    updates = tool_updates(session.id, assistant.id, args)
    events = [
        session_created(session),
        message_updated(user),
        message_updated(user),  # rewritten later (its summary): still one prompt
        message_updated(assistant),
        part_updated(text),
        part_updated(text.model_copy(update={"text": "Running it now"})),
        *updates[:2],
        asked(session.id, request_id),
        replied(session.id, request_id, reply="once", status="approved", decision="once", decidedBy="bob"),
        *updates[2:],
        message_updated(assistant),
        session_deleted(session),
        session_deleted(session),
    ]
    for event in events:
        event.actor = "alice"
    events[9].actor = "bob"  # the reply
    return events, session.id


EXPECTED_TURN = [
    ("session.created", "alice"),
    ("prompt.accepted", "alice"),
    ("tool.requested", "alice"),
    ("permission.asked", "alice"),
    ("tool.approved", "bob"),
    ("tool.executed", "alice"),
    ("session.deleted", "alice"),
]


def test_only_events_that_may_append_take_the_chain_lock_up_front() -> None:
    # The writer's opening takes a chain's lock for a batch with such an event (batch.py); one whose
    # entries `may_audit` missed would still be chained right, after a lock statement of its own.
    events, _ = scripted_turn({"command": "ls"})
    assert [may_audit(event) for event in events] == [
        True,  # session created
        True,  # the prompt
        True,  # the prompt rewritten (the deriver then finds it stored)
        False,  # the assistant message
        False,  # its text part
        False,  # updated
        True,  # the tool part, pending
        True,  # running
        True,  # permission asked
        True,  # replied
        True,  # the tool part, running again
        True,  # completed
        True,  # compacted
        False,  # the assistant message again
        True,  # session deleted
        True,  # twice
    ]


def test_an_event_of_unexpected_shape_may_append() -> None:
    # Not skipped by the opening's chain lock: it fails alone where it is recorded (the writer's
    # event-by-event retry), as any malformed event does, not the whole batch in the guess.
    for event in (
        Event(ev.MESSAGE_UPDATED, {"sessionID": "ses_x"}, session_id="ses_x", tenant_id=TENANT),
        Event(ev.PART_UPDATED, {"sessionID": "ses_x", "part": "text"}, session_id="ses_x", tenant_id=TENANT),
    ):
        assert may_audit(event)


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "one-batch"])
async def test_a_turn_is_recorded_on_transitions_only(store: Store, database_url: str, batched: bool) -> None:
    args: dict[str, Any] = {"command": "ls -la", "description": "List", "timeout": 2**60}
    events, session_id = scripted_turn(args)
    if batched:  # submitted together: the writer commits them as one group
        before = store.committed_batches
        await asyncio.gather(*(store.submit(event) for event in events))
        if store.dialect == "postgresql":  # its writer task cannot start between these submits
            assert store.committed_batches == before + 1
    else:
        for event in events:
            await store.write(event)

    assert await actions(store) == EXPECTED_TURN
    entries, _ = await store.audit_entries(TENANT)
    by_action = {entry.action: entry for entry in entries}
    assert all(entry.session_id == session_id for entry in entries)
    executed = by_action["tool.executed"].data
    expected_digest = hashlib.sha256(rfc8785.dumps({**args, "timeout": str(2**60)})).hexdigest()
    assert executed["argsSha256"] == expected_digest
    assert (executed["status"], executed["tool"], executed["callID"]) == ("completed", "bash", "call_1")
    assert by_action["tool.requested"].data["partID"] == executed["partID"]
    approved = by_action["tool.approved"].data
    assert (approved["reply"], approved["decision"], approved["decidedBy"]) == ("once", "once", "bob")
    assert "git status" not in str(by_action["permission.asked"].data)  # patterns only as a digest
    assert by_action["prompt.accepted"].data["agent"] == "build"
    assert [row["row_hash"] for row in await audit_rows(database_url, TENANT)] == recompute(
        await audit_rows(database_url, TENANT)
    )


async def test_an_error_ends_a_call_and_a_denial_is_recorded(store: Store) -> None:
    session = new_session()
    user = user_message(session.id)
    assistant = assistant_message(session.id, user.id)
    await store.write(session_created(session))
    await store.write(message_updated(assistant))
    part_id = ids.ascending("prt")
    start = now_ms()
    running = ToolStateRunning(input={"command": "rm -rf /"}, time=RunningTime(start=start))
    await store.write(tool_event(tool_part(assistant.id, session.id, part_id, running)))
    request_id = ids.ascending("per")
    await store.write(asked(session.id, request_id))
    await store.write(
        replied(
            session.id, request_id, reply="reject", status="expired", decision="timeout", decidedBy="deadline"
        )
    )
    failed = {
        "status": "error",
        "input": {"command": "rm -rf /"},
        "error": "denied",
        "time": {"start": start, "end": start},
    }
    errored = tool_part(assistant.id, session.id, part_id, failed)
    await store.write(tool_event(errored))

    entries, _ = await store.audit_entries(TENANT)
    assert [e.action for e in entries] == [
        "session.created",
        "tool.requested",
        "permission.asked",
        "tool.denied",
        "tool.executed",
    ]
    assert entries[3].data["decidedBy"] == "deadline" and entries[3].data["status"] == "expired"
    assert entries[4].data["status"] == "error"


async def test_a_dropped_event_leaves_no_entry(store: Store) -> None:
    session = new_session()
    user = user_message(session.id)
    assistant = assistant_message(session.id, user.id)
    for event in (session_created(session), message_updated(assistant), message_removed(assistant)):
        await store.write(event)
    late = tool_updates(session.id, assistant.id, {"command": "ls"})[0]  # its message is gone
    with pytest.raises(StoreWriteError):
        await store.write(late)
    assert [action for action, _ in await actions(store)] == ["session.created"]


# --- tampering ----------------------------------------------------------------------------------------


async def _chain_of_five(store: Store) -> list[str]:
    return [
        (await store.record_audit(TENANT, "test", actor="alice", data={"i": index})).id for index in range(5)
    ]


async def test_an_edited_row_is_named(store: Store, database_url: str) -> None:
    written = await _chain_of_five(store)
    await run_sql(
        database_url,
        "UPDATE audit_log SET data = :data WHERE tenant_id = :tenant AND seq = 3",
        data='{"i":99}',
        tenant=TENANT,
    )
    [report] = await verify(database_url)
    assert report.broken is not None
    assert (report.broken.seq, report.broken.id, report.length) == (3, written[2], 2)
    assert report.broken.reason.startswith("hash mismatch")


async def test_a_rechained_row_is_named_by_its_successor(store: Store, database_url: str) -> None:
    written = await _chain_of_five(store)
    # Edit row 2 and recompute its own hash: row 3 no longer links to it.
    rows = await audit_rows(database_url, TENANT)
    rows[1]["actor"] = "mallory"
    [_, forged, *_] = recompute(rows)
    await run_sql(
        database_url,
        "UPDATE audit_log SET actor = 'mallory', row_hash = :hash WHERE tenant_id = :tenant AND seq = 2",
        hash=forged,
        tenant=TENANT,
    )
    [report] = await verify(database_url)
    assert report.broken is not None
    assert (report.broken.seq, report.broken.id) == (3, written[3 - 1])
    assert report.broken.reason.startswith("prev_hash mismatch")


async def test_a_deleted_row_is_a_gap(store: Store, database_url: str) -> None:
    written = await _chain_of_five(store)
    await run_sql(database_url, "DELETE FROM audit_log WHERE tenant_id = :tenant AND seq = 2", tenant=TENANT)
    [report] = await verify(database_url)
    assert report.broken is not None
    assert (report.broken.seq, report.broken.id) == (3, written[2])
    assert report.broken.reason == "gap in seq: expected seq 2, found seq 3"


async def test_verify_walks_long_chains_in_pages(store: Store, database_url: str) -> None:
    await asyncio.gather(*(store.record_audit(TENANT, "test", actor="a", data={"i": i}) for i in range(25)))
    await run_sql(
        database_url, "UPDATE audit_log SET actor = 'x' WHERE tenant_id = :tenant AND seq = 23", tenant=TENANT
    )

    found: list[ChainReport] = []

    def work(conn: Connection) -> None:
        found.append(verify_chain(conn, TENANT, page=4))

    await asyncio.to_thread(run_with_connection, parse_database_url(owner_url(database_url)), work)
    [report] = found
    assert report.broken is not None and (report.broken.seq, report.length) == (23, 22)


# --- concurrency and config ---------------------------------------------------------------------------


async def test_two_writers_of_one_tenant_never_fork_the_chain(
    store: Store, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentforge.store.batch")
    second = await Store.open(database_url)
    try:
        sessions = [new_session() for _ in range(4)]

        async def write(target: Store, name: str, mine: list[Session]) -> None:
            created = [session_created(session) for session in mine]
            for event in created:
                event.actor = name
            work = [target.record_audit(TENANT, "test", actor=name, data={"i": i}) for i in range(40)]
            await asyncio.gather(*work, *(target.write(event) for event in created))

        await asyncio.gather(write(store, "a", sessions[:2]), write(second, "b", sessions[2:]))
    finally:
        await second.close()

    rows = await audit_rows(database_url, TENANT)
    assert [row["seq"] for row in rows] == list(range(1, 85))
    assert sorted(row["actor"] for row in rows).count("a") == 42
    [report] = await verify(database_url)
    assert report.ok and report.length == 84
    # Serialised, not merely rescued: no writer ever had to redo a batch over a clashing seq.
    assert not [r.getMessage() for r in caplog.records if r.name == "agentforge.store.batch"]


async def test_config_loaded_is_recorded_when_the_digest_changes(store: Store) -> None:
    first = await store.record_config_loaded("_system", "d1", ["/etc/a.json"], actor="system")
    assert first is not None and first.data == {"digest": "d1", "sources": ["/etc/a.json"]}
    await store.record_audit("_system", "auth.failed", actor="anonymous", data={"reason": "bad key"})
    assert await store.record_config_loaded("_system", "d1", [], actor="system") is None
    changed = await store.record_config_loaded("_system", "d2", [], actor="system")
    assert changed is not None and changed.seq == 3
    assert [a for a, _ in await actions(store, "_system")] == [
        "config.loaded",
        "auth.failed",
        "config.loaded",
    ]
