"""The last numbers a Postgres batch needs: what this writer expects, and the check that must hold
for a batch to use them instead of reading them."""

from __future__ import annotations

import pytest

from agentforge.store import Store, parse_database_url
from agentforge.store.engine import postgres_engine
from agentforge.store.last_numbers import PAUSE_AFTER_MISS, ExpectedNumbers, check, stale
from agentforge.store.tenancy import begin_in_tenant
from tests.store.builders import message_updated, new_session, session_created, user_message

TENANT = "default"


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


def test_the_oldest_are_forgotten_beyond_the_capacity() -> None:
    expected = ExpectedNumbers(capacity=2)
    expected.record({"s1": 1, "s2": 2, "s3": 3}, {"t": 3})
    assert expected.guess("t", ["s1"]) is None
    assert expected.guess("t", ["s2", "s3"]) == ({"s2": 2, "s3": 3}, 3)


async def test_the_check_holds_only_for_the_stored_numbers(store: Store, database_url: str) -> None:
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip("SQLite has one writer: its numbers are cached, never checked")
    session = new_session()
    await store.write(session_created(session))
    await store.write(message_updated(user_message(session.id)))
    logged = await store.events_after(TENANT, session.id, 0)
    last_seq, last_position = logged[-1].seq, logged[-1].position
    assert last_seq is not None and last_position is not None
    engine = postgres_engine(target, pool_size=1)
    try:
        async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None

            async def holds(seqs: dict[str, int], position: int) -> bool:
                await begin_in_tenant(driver, TENANT)
                try:
                    await driver.execute(check(TENANT, seqs, position))
                except Exception as exc:
                    assert stale(exc), exc
                    return False
                finally:
                    await driver.execute("ROLLBACK")
                return True

            assert await holds({session.id: last_seq}, last_position)
            assert await holds({session.id: last_seq, "ses_never": 0}, last_position)
            assert not await holds({session.id: last_seq - 1}, last_position)
            assert not await holds({session.id: last_seq}, last_position + 1)
            assert not await holds({session.id: last_seq, "ses_never": 1}, last_position)
    finally:
        await engine.dispose()
