"""Row-writing statements sent straight to the SQLite driver (store/direct.py) behave as through
SQLAlchemy: the same rows, the same counts, the same errors, and SQLAlchemy's path where it must."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from agentforge.store.direct import execute_rows
from agentforge.store.schema import metadata
from agentforge.store.schema import session as session_table

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
