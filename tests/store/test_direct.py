"""Row-writing statements sent straight to the driver (store/direct.py: SQLite's, or asyncpg's) behave
as through SQLAlchemy: the same rows, the same counts, the same errors, and SQLAlchemy's path where it
must."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from agentforge.store import Store, parse_database_url
from agentforge.store.direct import execute_rows
from agentforge.store.engine import postgres_engine
from agentforge.store.schema import message as message_table
from agentforge.store.schema import metadata
from agentforge.store.schema import session as session_table
from agentforge.store.tenancy import begin_in_tenant
from tests.store.builders import new_session, session_created

TENANT = "default"

_RENAME = (
    sa.update(session_table)
    .where(session_table.c.id == sa.bindparam("b_id"))
    .values(title=sa.bindparam("b_title"))
)


@pytest.fixture
def conn() -> Iterator[sa.Connection]:
    engine = sa.create_engine("sqlite://")
    metadata.create_all(engine)
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def _session(session_id: str) -> dict[str, object]:
    return {
        "id": session_id,
        "tenant_id": "t",
        "directory": "/w",
        "title": "old",
        "time_created": 1,
        "time_updated": 1,
        "data": "{}",
    }


def test_rows_are_written_and_counted_with_column_defaults_filled_in(conn: sa.Connection) -> None:
    # The session insert has Python-side defaults (the totals): it takes SQLAlchemy's path.
    assert execute_rows(conn, session_table.insert(), [_session("a"), _session("b")]) == 2
    renames = [
        {"b_id": "a", "b_title": "one"},
        {"b_id": "b", "b_title": "two"},
        {"b_id": "c", "b_title": "x"},
    ]
    assert execute_rows(conn, _RENAME, renames) == 2
    assert execute_rows(conn, _RENAME, [{"b_id": "a", "b_title": "again"}]) == 1
    rows = conn.execute(sa.select(session_table.c.id, session_table.c.title, session_table.c.cost))
    assert sorted(rows) == [("a", "again", 0.0), ("b", "two", 0.0)]


def test_a_violated_constraint_is_sqlalchemys_integrity_error(conn: sa.Connection) -> None:
    execute_rows(conn, session_table.insert(), [_session("a")])
    with pytest.raises(IntegrityError):
        execute_rows(conn, sa.insert(session_table).values(cost=0.0), [_session("a")])


def test_rows_naming_more_than_the_statement_binds_are_written_as_sqlalchemy_writes_them(
    conn: sa.Connection,
) -> None:
    execute_rows(conn, session_table.insert(), [_session("a")])
    assert execute_rows(conn, _RENAME, [{"b_id": "a", "b_title": "x", "b_other": 1}]) == 1
    assert conn.execute(sa.select(session_table.c.title)).scalar_one() == "x"


async def test_postgres_rows_go_to_asyncpg_and_count_and_fail_as_through_sqlalchemy(
    store: Store, database_url: str
) -> None:
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip("the Postgres path of the same function")
    session = new_session()
    await store.write(session_created(session))
    engine = postgres_engine(target, pool_size=1)
    try:
        async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            await begin_in_tenant(driver, TENANT)  # as the writer opens its transactions (batch.py)
            rename = [{"b_id": session.id, "b_title": "one"}]
            assert await conn.run_sync(execute_rows, _RENAME, rename) == 1
            assert await conn.run_sync(execute_rows, _RENAME, [{"b_id": "ses_none", "b_title": "x"}]) == 0
            twice = [{"b_id": session.id, "b_title": "two"}, {"b_id": "ses_none", "b_title": "x"}]
            through_sqlalchemy = (await conn.execute(_RENAME, twice)).rowcount
            assert await conn.run_sync(execute_rows, _RENAME, twice) == through_sqlalchemy
            assert (await conn.execute(sa.select(session_table.c.title))).scalar_one() == "two"
            await driver.execute("SAVEPOINT s")
            orphan = {
                "id": "msg_orphan",
                "tenant_id": TENANT,
                "session_id": "ses_none",
                "time_created": 1,
                "data": "{}",
                "role": "user",
                "time_completed": 1,
                "compaction_boundary": None,
                "revision": 1,
            }
            with pytest.raises(IntegrityError):
                await conn.run_sync(execute_rows, message_table.insert(), [orphan])
            await driver.execute("ROLLBACK TO SAVEPOINT s")
            assert await conn.run_sync(execute_rows, _RENAME, rename) == 1  # the transaction goes on
            await driver.execute("ROLLBACK")
    finally:
        await engine.dispose()
