"""Row-writing statements sent straight to the driver (store/direct.py: SQLite's, or asyncpg's) behave
as through SQLAlchemy: the same rows, the same counts, the same errors, and SQLAlchemy's path where it
must."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import orjson
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from agentforge.model.events import Event
from agentforge.model.message import UserMessage
from agentforge.model.session import Session
from agentforge.store import Store, StoreWriteError, held, parse_database_url
from agentforge.store.batch import Applied, BatchApplier, Committed, Item, Mutation, Outcome
from agentforge.store.direct import Run, execute_rows, execute_runs
from agentforge.store.engine import DatabaseTarget, postgres_engine
from agentforge.store.held import MAX_HELD_CHARS
from agentforge.store.last_numbers import PAUSE_AFTER_MISS, STALE
from agentforge.store.schema import message as message_table
from agentforge.store.schema import metadata
from agentforge.store.schema import part as part_table
from agentforge.store.schema import session as session_table
from agentforge.store.store import finishing_prompts
from agentforge.store.tenancy import begin_in_tenant
from tests.store.audit_helpers import run_sql
from tests.store.builders import (
    assistant_message,
    message_updated,
    new_session,
    part_updated,
    session_created,
    text_part,
    user_message,
)
from tests.store.conftest import driver_of
from tests.store.test_audit import tool_updates

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

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


def _message(message_id: str, session_id: str) -> dict[str, object]:
    return {
        "id": message_id,
        "tenant_id": TENANT,
        "session_id": session_id,
        "time_created": 1,
        "data": "{}",
        "role": "assistant",
        "time_completed": None,
        "compaction_boundary": None,
        "revision": 1,
    }


def _part(part_id: str, message_id: str, session_id: str, data: str, created: int) -> dict[str, object]:
    return {
        "id": part_id,
        "tenant_id": TENANT,
        "message_id": message_id,
        "session_id": session_id,
        "time_created": created,
        "data": data,
        "revision": 1,
    }


def _postgres_only(database_url: str) -> DatabaseTarget:
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip("SQLite sends each run by itself")
    return target


def _part_upsert() -> Any:
    """A part's upsert as the projector writes it: a new version replaces data and revision."""
    from sqlalchemy.dialects.postgresql import insert

    base = insert(part_table)
    return base.on_conflict_do_update(
        index_elements=[part_table.c.id],
        set_={"data": base.excluded.data, "revision": base.excluded.revision},
    )


async def _writes(driver: Any, queries: list[str]) -> list[str]:
    """The statements that wrote (not asyncpg's look-ups of the array types), once its query logger
    has had every record so far (it is called back after each query: a marker query's record is
    the last)."""
    await driver.fetchval("SELECT 'marker'")
    for _ in range(1000):
        if queries and "'marker'" in queries[-1]:
            break
        await asyncio.sleep(0)
    return [query for query in queries if "INSERT" in query or "UPDATE" in query]


@contextlib.asynccontextmanager
async def _in_tenant(target: DatabaseTarget) -> AsyncIterator[tuple[AsyncConnection, Any, list[str]]]:
    """A connection as the store's writer has it (AUTOCOMMIT, its transaction opened with its tenant
    by hand), the asyncpg connection under it, and the statements it sends; rolled back after."""
    engine = postgres_engine(target, pool_size=1)
    statements: list[str] = []
    try:
        async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            driver.add_query_logger(lambda record: statements.append(record.query))
            await begin_in_tenant(driver, TENANT)
            yield conn, driver, statements
            await driver.execute("ROLLBACK")
    finally:
        await engine.dispose()


async def test_postgres_runs_of_inserts_go_as_one_statement_and_write_as_one_after_another(
    store: Store, database_url: str
) -> None:
    """Runs into different tables in one statement (a part before its message: foreign keys are
    checked once it has run), an upsert given an id twice written as the rows one after the other
    would (`once`: its first time_created, its last data), and what cannot go together sent alone."""
    target = _postgres_only(database_url)
    from agentforge.store.projector import _ONCE  # the projector's rule for its upserts

    session = new_session()
    await store.write(session_created(session))
    upsert = _part_upsert()
    async with _in_tenant(target) as (conn, driver, statements):
        parts = [
            _part("prt_a", "msg_a", session.id, '{"v":1}', 10),
            _part("prt_b", "msg_a", session.id, '{"v":1}', 20),
            _part("prt_a", "msg_a", session.id, '{"v":2}', 30),
        ]
        runs = [
            Run(upsert, parts, _ONCE["part"]),
            Run(message_table.insert(), [_message("msg_a", session.id)]),
        ]
        statements.clear()
        await conn.run_sync(execute_runs, runs)
        assert [query.startswith("WITH ") for query in await _writes(driver, statements)] == [True]
        found = await conn.execute(
            sa.select(part_table.c.id, part_table.c.data, part_table.c.time_created).order_by(part_table.c.id)
        )
        assert [tuple(row) for row in found] == [("prt_a", '{"v":2}', 10), ("prt_b", '{"v":1}', 20)]
        # Rows naming two messages for one id have no `once`: sent by themselves, one by one.
        moved = [
            _part("prt_c", "msg_a", session.id, "{}", 1),
            _part("prt_c", "msg_b", session.id, "{}", 2),
        ]
        again = [
            Run(message_table.insert(), [_message("msg_b", session.id)]),
            Run(upsert, moved, _ONCE["part"]),
        ]
        statements.clear()
        await conn.run_sync(execute_runs, again)
        assert len(await _writes(driver, statements)) == 2
        # A violated constraint in the one statement fails as SQLAlchemy's error, as alone.
        await driver.execute("SAVEPOINT s")
        taken = [
            Run(upsert, [_part("prt_d", "msg_a", session.id, "{}", 1)], _ONCE["part"]),
            Run(message_table.insert(), [_message("msg_a", session.id)]),
        ]
        statements.clear()
        with pytest.raises(IntegrityError):
            await conn.run_sync(execute_runs, taken)
        await driver.execute("ROLLBACK TO SAVEPOINT s")
        assert [query.startswith("WITH ") for query in await _writes(driver, statements)] == [True]


async def test_postgres_one_row_updates_go_with_inserts_and_count_what_they_changed(
    store: Store, database_url: str
) -> None:
    target = _postgres_only(database_url)
    session, other = new_session(), new_session()
    await store.write(session_created(session))
    await store.write(session_created(other))
    counts: list[int] = []
    async with _in_tenant(target) as (conn, driver, statements):
        runs = [
            Run(message_table.insert(), [_message("msg_a", session.id)]),
            Run(_RENAME, [{"b_id": other.id, "b_title": "renamed"}], counted=counts.append),
            Run(part_table.insert(), [_part("prt_a", "msg_a", session.id, "{}", 1)]),
            Run(_RENAME, [{"b_id": "ses_none", "b_title": "x"}], counted=counts.append),
        ]
        statements.clear()
        await conn.run_sync(execute_runs, runs)
        # The second rename meets the sessions table again: a statement of its own.
        writes = await _writes(driver, statements)
        assert [query.split(" ", 1)[0] for query in writes] == ["WITH", "UPDATE"]
        assert counts == [1, 0]
        titles = await conn.execute(sa.select(session_table.c.id, session_table.c.title))
        assert {row[0]: row[1] for row in titles} == {session.id: session.title, other.id: "renamed"}


async def test_postgres_runs_into_one_table_go_together_when_their_rows_differ_and_read_what_they_replace(
    store: Store, database_url: str
) -> None:
    """Parts of different ids in one statement, one of them handing back the row it replaced as
    the statement found it; a part met twice goes in a statement of its own, after the first."""
    target = _postgres_only(database_url)
    session = new_session()
    await store.write(session_created(session))
    upsert = _part_upsert()
    replaced: list[str | None] = []
    async with _in_tenant(target) as (conn, driver, statements):
        await conn.run_sync(execute_runs, [Run(message_table.insert(), [_message("msg_a", session.id)])])
        await conn.run_sync(execute_runs, [Run(upsert, [_part("prt_a", "msg_a", session.id, "old", 1)])])
        runs = [
            Run(upsert, [_part("prt_b", "msg_a", session.id, "b", 1)]),
            Run(upsert, [_part("prt_a", "msg_a", session.id, "new", 1)], replaced=replaced.append),
            Run(upsert, [_part("prt_c", "msg_a", session.id, "c", 1)], replaced=replaced.append),
            Run(upsert, [_part("prt_c", "msg_a", session.id, "c2", 1)], replaced=replaced.append),
        ]
        await _writes(driver, statements)  # every record so far in: then none left to come
        statements.clear()
        await conn.run_sync(execute_runs, runs)
        assert replaced == ["old", None, "c"]
        assert [query.startswith("WITH ") for query in await _writes(driver, statements)] == [True, True]
        found = await conn.execute(sa.select(part_table.c.id, part_table.c.data).order_by(part_table.c.id))
        assert [tuple(row) for row in found] == [("prt_a", "new"), ("prt_b", "b"), ("prt_c", "c2")]


# --- the held message (Postgres: the writer's batches) -------------------------------------------


class _Writer:
    """A BatchApplier on a connection like the store's writer's, and what its driver sent."""

    def __init__(self, conn: AsyncConnection, driver: Any) -> None:
        self.conn, self.driver = conn, driver
        self.applier = BatchApplier(scoped_by_tenant=True)
        self.sent: list[str] = []
        driver.add_query_logger(lambda record: self.sent.append(record.query))

    async def write(self, *items: Item) -> list[Outcome]:
        outcomes = await self.conn.run_sync(lambda sync: self.applier.write_batch(sync, items))
        await _writes(self.driver, self.sent)  # its query log up to date
        return outcomes

    async def sending(self, *items: Item, prepares: bool = False) -> tuple[list[Outcome], list[str]]:
        """The batch's outcomes and the messages it sent (with `prepares`, its PREPAREs too)."""
        await _writes(self.driver, self.sent)
        self.sent.clear()
        outcomes = await self.write(*items)
        skipped = ("'marker'",) if prepares else ("'marker'", "PREPARE ")
        return outcomes, [query for query in self.sent if not any(mark in query[:40] for mark in skipped)]


async def _writer(writer_connection: AsyncConnection) -> _Writer:
    return _Writer(writer_connection, await driver_of(writer_connection))


async def _started(store: Store, writer_connection: AsyncConnection) -> tuple[Session, _Writer, UserMessage]:
    """A session with a user message, written by a `_Writer` (which so learns its numbers)."""
    session = new_session()
    await store.write(session_created(session))
    writer = await _writer(writer_connection)
    message = user_message(session.id)
    await writer.write(message_updated(message))
    return session, writer, message


async def test_postgres_a_batch_whose_numbers_the_writer_expects_is_one_message_with_its_commit(
    store: Store, writer_connection: AsyncConnection
) -> None:
    """Its opening, its rows (a statement prepared once per connection) and its COMMIT in one
    round trip, written as they would be one statement after the other."""
    session = new_session()
    await store.write(session_created(session))
    writer = await _writer(writer_connection)
    message = user_message(session.id)
    await writer.write(message_updated(message))  # learns the numbers
    parts = [text_part(message, f"part {n} with 'quotes', \\ and {{braces}}") for n in range(3)]
    outcomes, sent = await writer.sending(*(part_updated(part) for part in parts[:2]), prepares=True)
    assert all(isinstance(outcome, Committed) for outcome in outcomes)
    assert [query.split(" ", 1)[0] for query in sent] == ["PREPARE", "BEGIN;"], sent
    assert sent[1].endswith("; COMMIT") and "EXECUTE agentforge_held_" in sent[1]
    outcomes, sent = await writer.sending(part_updated(parts[2]), prepares=True)
    assert len(sent) == 1 and sent[0].startswith("BEGIN;") and sent[0].endswith("; COMMIT"), sent
    history = await store.history(TENANT, session.id)
    assert [[getattr(part, "text", None) for part in item.parts] for item in history] == [
        [part.text for part in parts]
    ]
    logged = await store.events_after(TENANT, session.id, 0)
    assert [event.seq for event in logged] == list(range(1, len(logged) + 1))


async def test_postgres_a_statement_through_sqlalchemy_in_a_held_batch_runs_after_what_is_held(
    store: Store, writer_connection: AsyncConnection
) -> None:
    """A mutation's statement goes after the held opening and rows, in their transaction: it sees the
    tenant the opening set and the rows the batch wrote before it."""
    session, writer, message = await _started(store, writer_connection)
    seen: list[tuple[Any, ...]] = []

    def look(sync: sa.Connection) -> None:
        found = sync.execute(
            sa.text(
                "SELECT current_setting('app.tenant_id', true),"
                " (SELECT count(*) FROM part WHERE session_id = :session)"
            ),
            {"session": session.id},
        )
        seen.append(tuple(found.one()))

    look_around = Mutation(TENANT, "look", look, may_audit=False)
    outcomes, sent = await writer.sending(part_updated(text_part(message, "before")), look_around)
    assert not [outcome for outcome in outcomes if isinstance(outcome, StoreWriteError)]
    assert seen == [(TENANT, 1)]
    assert sent[0].startswith("BEGIN;") and "EXECUTE" in sent[0] and not sent[0].endswith("COMMIT"), sent
    assert sent[-1] == "COMMIT"


async def test_postgres_a_held_batch_another_writer_got_ahead_of_is_written_again_whole(
    store: Store, writer_connection: AsyncConnection
) -> None:
    """The store's own writer moves the tenant's position: the held batch's check fails, nothing of
    it was written, and it is written again with the numbers as they are (then no longer held:
    another writer is about)."""
    session, other = new_session(), new_session()
    await store.write(session_created(session))
    await store.write(session_created(other))
    writer = await _writer(writer_connection)
    message = user_message(session.id)
    await writer.write(message_updated(message))
    await store.write(message_updated(user_message(other.id)))  # another writer, the same tenant
    outcomes, sent = await writer.sending(part_updated(text_part(message, "after the other")))
    assert [type(outcome) for outcome in outcomes] == [Committed]
    assert sent[0].startswith("BEGIN;") and sent[0].endswith("; COMMIT") and sent[1] == "ROLLBACK", sent
    assert not [query for query in sent[2:] if "EXECUTE" in query], "written again as it goes"
    logged = await store.events_after(TENANT, None, 0)
    positions = [event.position or 0 for event in logged]
    assert positions == sorted(set(positions)) and 0 not in positions
    history = await store.history(TENANT, session.id)
    assert [len(item.parts) for item in history] == [1]
    _, sent = await writer.sending(part_updated(text_part(message, "next")))
    assert not [query for query in sent if "EXECUTE" in query], "not held while another writer is about"
    for _ in range(PAUSE_AFTER_MISS):
        await writer.write(part_updated(text_part(message, "more")))
    _, sent = await writer.sending(part_updated(text_part(message, "checked again")))
    assert STALE in sent[0] and not [query for query in sent if "EXECUTE" in query], "checked, not yet held"


async def test_postgres_a_held_batch_failing_before_anything_was_sent_sends_no_rollback(
    store: Store, writer_connection: AsyncConnection
) -> None:
    session, writer, message = await _started(store, writer_connection)

    def refuse(_: sa.Connection) -> None:
        raise ValueError("refused")

    outcomes, sent = await writer.sending(
        part_updated(text_part(message, "kept")), Mutation(TENANT, "refuse", refuse, may_audit=False)
    )
    assert [type(outcome) for outcome in outcomes] == [Committed, StoreWriteError]
    assert not [query for query in sent if "EXECUTE" in query or query == "ROLLBACK"], sent
    history = await store.history(TENANT, session.id)
    assert [len(item.parts) for item in history] == [1]


async def test_postgres_a_batch_of_mutations_alone_is_one_message_and_finishes_prompts_in_it(
    store: Store, writer_connection: AsyncConnection
) -> None:
    """Nothing to number, nothing to check: a finished prompt's removal is held with the opening and
    goes with its COMMIT, and the queue entry is gone."""
    session = new_session()
    await store.write(session_created(session))
    message = user_message(session.id)
    await store.submit_group([message_updated(message)], queue_prompt=message.id)
    writer = await _writer(writer_connection)
    outcomes, sent = await writer.sending(finishing_prompts(TENANT, session.id, message.id))
    assert [type(outcome) for outcome in outcomes] == [Applied]
    assert len(sent) == 1 and sent[0].startswith("BEGIN;") and sent[0].endswith("; COMMIT"), sent
    assert "EXECUTE agentforge_held_" in sent[0]
    assert await store.queued_prompts(2**62) == []


async def test_postgres_a_batch_past_the_held_bound_goes_with_parameters(
    store: Store, writer_connection: AsyncConnection
) -> None:
    session, writer, message = await _started(store, writer_connection)
    large = text_part(message, "x" * MAX_HELD_CHARS)
    outcomes, sent = await writer.sending(part_updated(large))
    assert [type(outcome) for outcome in outcomes] == [Committed]
    assert not [query for query in sent if "EXECUTE" in query] and sent[-1] == "COMMIT", [
        q[:80] for q in sent
    ]
    history = await store.history(TENANT, session.id)
    assert [getattr(part, "text", None) for part in history[0].parts] == [large.text]


async def test_postgres_a_commit_of_a_transaction_that_failed_meanwhile_raises(
    writer_connection: AsyncConnection,
) -> None:
    """A statement's error caught by whoever sent it leaves the transaction aborted: its COMMIT
    ends it as a ROLLBACK without an error from Postgres, and must not pass for a commit."""

    def write(sync: sa.Connection) -> None:
        held.hold(sync, f"BEGIN; SELECT set_config('app.tenant_id', '{TENANT}', true)")
        with contextlib.suppress(sa.exc.DBAPIError):
            sync.exec_driver_sql("SELECT 1 / 0")  # sends what is held, then fails
        try:
            with pytest.raises(sa.exc.DBAPIError, match="rolled back"):
                held.commit(sync)
        finally:
            held.rollback(sync)

    await writer_connection.run_sync(write)


async def _tool_call_under_way(
    store: Store, writer_connection: AsyncConnection
) -> tuple[_Writer, list[Event], list[str]]:
    """A `_Writer`'s session with an assistant message, and a tool call's five writes of its part
    (tests/store/test_audit.py `tool_updates`): each of the first three one message (its row as
    this writer wrote it, checked, not read), and what they sent. Its input holds what a digest
    of Postgres's text and one of Python's could differ on were either side to encode it
    otherwise: quotes, backslashes, line ends, characters beyond ASCII and beyond 16 bits."""
    session, writer, user = await _started(store, writer_connection)
    assistant = assistant_message(session.id, user.id)
    await writer.write(message_updated(assistant))
    command = "printf 'it''s' \"ok\" \\n \\\\ \r\n\t café 日本 😀 \u2028 end"
    updates = tool_updates(session.id, assistant.id, {"command": command})
    sent: list[str] = []
    for update in updates[:3]:
        outcomes, sending = await writer.sending(update)
        assert [type(outcome) for outcome in outcomes] == [Committed]
        sent += sending
    return writer, updates, sent


async def _tool_actions(store: Store) -> list[str]:
    entries, _ = await store.audit_entries(TENANT, limit=1000)
    return [entry.action for entry in entries if entry.action.startswith("tool.")]


async def test_postgres_a_tool_parts_writes_are_held_expecting_the_row_this_writer_wrote(
    store: Store, writer_connection: AsyncConnection, database_url: str
) -> None:
    """Pending (no row expected), running, running again, completed: each write one message with
    its COMMIT, the row it replaces checked there instead of read, and the audit's transitions as
    when it reads them. Its last state is forgotten: a later write (its output compacted) reads."""
    writer, updates, sent = await _tool_call_under_way(store, writer_connection)
    _, completing = await writer.sending(updates[3])
    for message in [*sent, *completing]:
        assert message.startswith("BEGIN;") and message.endswith("; COMMIT"), sent + completing
    assert len(sent + completing) == 4
    _, compacting = await writer.sending(updates[4])
    assert len(compacting) > 1 and compacting[-1].endswith("COMMIT"), "its row read first"
    assert await _tool_actions(store) == ["tool.requested", "tool.executed"]
    rows = await run_sql(database_url, "SELECT data FROM part WHERE id = :id", id=_part_field(updates[4]))
    assert [orjson.loads(row["data"]) for row in rows] == [updates[4].properties["part"]]


async def test_postgres_a_tool_part_changed_behind_the_writer_is_written_again_reading_it(
    store: Store, writer_connection: AsyncConnection, database_url: str
) -> None:
    """The row is no longer the one this writer wrote (here completed by hand): the held message
    fails and rolls back whole, the batch is written again reading the row, and the audit goes by
    the row as it is (already completed: no second `tool.executed`)."""
    writer, updates, _ = await _tool_call_under_way(store, writer_connection)
    await run_sql(
        database_url,
        "UPDATE part SET data = :data WHERE id = :id",
        data=_data(updates[3]),
        id=_part_field(updates[3]),
    )
    outcomes, sent = await writer.sending(updates[3])
    assert [type(outcome) for outcome in outcomes] == [Committed]
    assert sent[0].endswith("; COMMIT") and sent[1] == "ROLLBACK", sent
    assert len(sent) > 3, "written again, its row read"
    assert await _tool_actions(store) == ["tool.requested"]
    _, sent = await writer.sending(updates[4])  # completed: forgotten, read
    assert len(sent) > 1
    assert await _tool_actions(store) == ["tool.requested"]
    session_id, message_id = _part_field(updates[0], "sessionID"), _part_field(updates[0], "messageID")
    _, sent = await writer.sending(tool_updates(session_id, message_id, {})[0])
    assert len(sent) == 1, "its numbers still expected: held"


async def test_postgres_two_writes_of_a_tool_part_in_one_batch_are_each_checked_in_its_message(
    store: Store, writer_connection: AsyncConnection
) -> None:
    """Pending alone, then running and running again in one batch: one message, the second write
    expecting the row the first left there."""
    writer, _, _ = await _tool_call_under_way(store, writer_connection)
    session_id, message_id = await _session_and_message(store)
    updates = tool_updates(session_id, message_id, {"command": "pwd"})
    await writer.write(updates[0])
    outcomes, sent = await writer.sending(updates[1], updates[2], updates[3])
    assert [type(outcome) for outcome in outcomes] == [Committed] * 3
    assert len(sent) == 1 and sent[0].endswith("; COMMIT"), sent
    assert await _tool_actions(store) == ["tool.requested", "tool.requested", "tool.executed"]


async def test_postgres_a_pending_tool_part_whose_id_is_taken_is_written_again_reading_the_row(
    store: Store, writer_connection: AsyncConnection, database_url: str
) -> None:
    """A part this writer never wrote, in its first state, is expected to have no row: one there
    fails the held message, and the batch written again reads it (not new: no `tool.requested`)."""
    writer, _, _ = await _tool_call_under_way(store, writer_connection)
    session_id, message_id = await _session_and_message(store)
    pending = tool_updates(session_id, message_id, {"command": "pwd"})[0]
    await run_sql(
        database_url,
        "INSERT INTO part (id, tenant_id, message_id, session_id, time_created, data)"
        " VALUES (:id, :tenant, :message, :session, 1, :data)",
        id=_part_field(pending),
        tenant=TENANT,
        message=message_id,
        session=session_id,
        data=_data(pending),
    )
    outcomes, sent = await writer.sending(pending)
    assert [type(outcome) for outcome in outcomes] == [Committed]
    assert sent[0].endswith("; COMMIT") and sent[1] == "ROLLBACK" and len(sent) > 3, sent
    assert await _tool_actions(store) == ["tool.requested"], "only the first call's"


async def _session_and_message(store: Store) -> tuple[str, str]:
    """The session and assistant message of `_tool_call_under_way`."""
    (session,) = await store.list_sessions(TENANT)
    history = await store.history(TENANT, session.id)
    return session.id, history[-1].info.id


def _part_field(update: Event, field: str = "id") -> str:
    return str(update.properties["part"][field])


def _data(update: Event) -> str:
    return orjson.dumps(update.properties["part"]).decode()
