"""The last numbers a Postgres batch needs: what this writer expects, and the check that must hold
for a batch to use them instead of reading them."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Connection, event
from sqlalchemy.ext.asyncio import AsyncConnection

from agentforge.store import Store, StoreWriteError
from agentforge.store.batch import BatchApplier, Item, Outcome
from agentforge.store.last_numbers import PAUSE_AFTER_MISS, SETTLED_AFTER_MISS, ExpectedNumbers, check, stale
from agentforge.store.store import checkpointing, finishing_prompts
from agentforge.store.tenancy import begin_in_tenant
from tests.store.audit_helpers import audit_rows, run_sql
from tests.store.builders import message_updated, new_session, session_created, text_part, user_message
from tests.store.conftest import driver_of

TENANT = "default"
_REVISION = "SELECT history_revision FROM session WHERE id = $1"


def test_a_guess_needs_every_session_and_the_tenant_known() -> None:
    expected = ExpectedNumbers()
    assert expected.guess("t", ["s1"]) is None
    expected.record({"s1": 4}, {"t": 9})
    assert expected.guess("t", ["s1"]) == ({"s1": 4}, 9)
    assert expected.guess("t", ["s1", "s2"]) is None  # s2 never written here
    assert expected.guess("u", ["s1"]) is None  # nor tenant u


def test_after_a_miss_nothing_is_guessed_for_a_while() -> None:
    expected = ExpectedNumbers()
    expected.record({"s1": 4}, {"t": 9})
    expected.missed()
    for _ in range(PAUSE_AFTER_MISS):
        expected.record({"s1": 5}, {"t": 10})
        assert expected.guess("t", ["s1"]) is None
    assert expected.guess("t", ["s1"]) == ({"s1": 5}, 10)


def test_a_writer_is_settled_only_long_after_its_last_miss() -> None:
    expected = ExpectedNumbers()
    assert expected.settled  # no miss yet
    expected.missed()
    for _ in range(SETTLED_AFTER_MISS):
        assert not expected.settled
        expected.record({"s1": 5}, {"t": 10})
    assert expected.settled


def test_the_oldest_are_forgotten_beyond_the_capacity() -> None:
    expected = ExpectedNumbers(capacity=2)
    expected.record({"s1": 1, "s2": 2, "s3": 3}, {"t": 3})
    assert expected.guess("t", ["s1"]) is None
    assert expected.guess("t", ["s2", "s3"]) == ({"s2": 2, "s3": 3}, 3)


def test_revisions_and_heads_are_expected_until_changed_unseen() -> None:
    expected = ExpectedNumbers()
    expected.record({"s1": 4}, {"t": 9}, {"s1": 3, "s2": 7}, {"t": (5, "ab")})
    assert expected.revisions(["s1", "s2", "s3"]) == {"s1": 3, "s2": 7}
    assert expected.head("t") == (5, "ab")
    # None: the batch changed them without knowing to what (a mutation, a deleted session).
    expected.record({"s1": 5}, {"t": 10}, {"s2": None}, {"t": None})
    assert expected.revisions(["s1", "s2"]) == {"s1": 3}
    assert expected.head("t") is None
    expected.missed()
    assert expected.revisions(["s1"]) == {}


def test_the_check_refuses_ids_it_cannot_write_as_literals() -> None:
    for seqs, bumps in (({"ses_a'; DROP TABLE event; --": 1}, None), ({"ses_a": 1}, {"ses_b') OR ('1": 0})):
        with pytest.raises(ValueError, match="plain"):
            check("default", seqs, 0, bumps)
    with pytest.raises(ValueError, match="plain"):
        check("default' OR '1", {}, 0)


async def _checked(driver: Any, statement: str, session_id: str | None = None) -> tuple[bool, Any]:
    """Run the check `statement` in a tenant transaction, rolled back after: whether it held (a
    failure must be the check's own), and with `session_id` that session's revision after it."""
    await begin_in_tenant(driver, TENANT)
    try:
        await driver.execute(statement)
        found = None if session_id is None else await driver.fetchval(_REVISION, session_id)
    except Exception as exc:
        assert stale(exc), exc
        return False, None
    finally:
        await driver.execute("ROLLBACK")
    return True, found


async def test_the_check_holds_only_for_the_stored_numbers(
    store: Store, writer_connection: AsyncConnection
) -> None:
    session = new_session()
    await store.write(session_created(session))
    await store.write(message_updated(user_message(session.id)))
    logged = await store.events_after(TENANT, session.id, 0)
    last_seq, last_position = logged[-1].seq, logged[-1].position
    assert last_seq is not None and last_position is not None
    driver = await driver_of(writer_connection)

    async def holds(seqs: dict[str, int], position: int) -> bool:
        held, _ = await _checked(driver, check(TENANT, seqs, position))
        return held

    assert await holds({session.id: last_seq}, last_position)
    assert await holds({session.id: last_seq, "ses_never": 0}, last_position)
    assert not await holds({session.id: last_seq - 1}, last_position)
    assert not await holds({session.id: last_seq}, last_position + 1)
    assert not await holds({session.id: last_seq, "ses_never": 1}, last_position)


async def test_the_check_bumps_expected_revisions_and_holds_only_for_the_chain_head(
    store: Store, database_url: str, writer_connection: AsyncConnection
) -> None:
    session = new_session()
    await store.write(session_created(session))
    await store.write(message_updated(user_message(session.id)))  # a prompt.accepted entry
    logged = await store.events_after(TENANT, session.id, 0)
    seqs, position = {session.id: logged[-1].seq or 0}, logged[-1].position or 0
    [row] = await run_sql(database_url, "SELECT history_revision FROM session WHERE id = :id", id=session.id)
    revision = int(row["history_revision"])
    last = (await audit_rows(database_url, TENANT))[-1]
    head = (int(last["seq"]), str(last["row_hash"]))
    driver = await driver_of(writer_connection)

    async def holds(bumps: dict[str, int], chain_head: tuple[int, str] | None) -> int | None:
        """The session's revision after the check in its transaction, None: it failed."""
        held, found = await _checked(driver, check(TENANT, seqs, position, bumps, chain_head), session.id)
        return int(found) if held else None

    assert await holds({session.id: revision}, head) == revision + 1
    assert await holds({}, head) == revision
    assert await holds({session.id: revision - 1}, head) is None
    assert await holds({session.id: revision, "ses_gone": 0}, None) is None
    assert await holds({}, (head[0] - 1, head[1])) is None
    assert await holds({}, (head[0], "0" * 64)) is None
    assert await holds({}, (0, "0" * 64)) is None  # an empty chain's head


async def test_a_mutation_that_never_audits_leaves_the_chain_head_expected(
    store: Store, writer_connection: AsyncConnection
) -> None:
    # A part checkpoint or a finished prompt (`may_audit=False`) in a batch must neither make the
    # writer forget the audit chain head its batch left (the next one would read it again) nor keep
    # the head from before the batch (the next check would fail, roll back and pause the checks).
    # A batch of such mutations alone, having no events to number, reads no last numbers either.
    session = new_session()
    await store.write(session_created(session))
    first = user_message(session.id)
    checkpoint = checkpointing(TENANT, text_part(first, "so far").wire())
    finished = finishing_prompts(TENANT, session.id, first.id)
    applier = BatchApplier(scoped_by_tenant=True)
    driver = await driver_of(writer_connection)
    sent: list[str] = []  # the driver's own messages (the openings, ROLLBACK)
    driver.add_query_logger(lambda record: sent.append(record.query))
    statements: list[str] = []  # and what SQLAlchemy sends

    def log_statement(*args: Any) -> None:
        statements.append(str(args[2]))

    async def write(*items: Item) -> None:
        def batch(sync: Connection) -> list[Outcome]:
            event.listen(sync, "before_cursor_execute", log_statement)
            try:
                return applier.write_batch(sync, items)
            finally:
                event.remove(sync, "before_cursor_execute", log_statement)

        outcomes = await writer_connection.run_sync(batch)
        assert not [o for o in outcomes if isinstance(o, StoreWriteError)]

    await write(message_updated(first))  # learns the numbers and the head
    await write(message_updated(user_message(session.id)), checkpoint)  # appends, then mutates
    statements.clear()
    await write(checkpoint, finished)  # alone
    assert statements and not [sql for sql in statements if "max(" in sql], statements
    await driver.fetchval("SELECT 1")  # the driver's query log is up to date (call_soon)
    sent.clear()
    await write(message_updated(user_message(session.id)))
    await driver.fetchval("SELECT 1")

    openings = [query for query in sent if query.startswith("BEGIN;")]
    assert len(openings) == 1 and "audit_log" in openings[0], "the head is checked, not read again"
    assert "ROLLBACK" not in sent, "and it is the head the last batch left"
