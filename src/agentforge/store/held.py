"""The writer's held message (Postgres): a batch's opening, its rows and its COMMIT in one round trip.

A Postgres batch took a round trip for its opening (BEGIN, its locks and the check of the numbers
its writer expects: last_numbers.py), one per statement of rows and one for its COMMIT. Where the
writer expects its numbers (batch.py), `hold` keeps the opening instead of sending it, the row
statements are added (`Held.add`: direct.py writes them as the EXECUTE of a statement prepared on
the connection, their values as literals: literals.py), and `commit` sends it all with the COMMIT
as one simple-protocol message. Postgres runs its statements in order, each seeing the ones before.

Whatever needs an answer sends what is held first (`send_held`), then goes on as before: every
statement through SQLAlchemy on the connection (a listener before each), the driver calls of
direct.py, a statement reading the row it replaces. Inside a savepoint nothing is held (a failure
must surface there, where it is rolled back to). So a held statement's error surfaces at the next
statement that needs an answer, or at the COMMIT, as the same SQLAlchemy error (`raise_translated`);
a held run that counts its rows fails as its callback says when it changed none (`UNCHANGED`), and
a row replaced that was not as its run expected (direct.py `ExpectedRow`: none, or the data this writer
last wrote there) fails the message with `HeldReplaceError` (`REPLACED`): the batch is then written
again, unheld. A message is bounded (`MAX_HELD_CHARS`): beyond it a
statement goes with its parameters as before.

What Postgres logs of a failed statement (`log_min_error_statement`) is the message, values and all,
where a statement with parameters showed only its placeholders: the README says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Connection, event
from sqlalchemy.exc import DBAPIError

_HELD: Final = "agentforge.held"
# What a held statement's check casts to an integer when a counted run changed no row (with its
# number in the message) or a row replaced was not as expected: Postgres then fails the message with
# invalid_text_representation naming the text.
UNCHANGED: Final = "agentforge unchanged "
REPLACED: Final = "agentforge replaced "
_UNCHANGED_NUMBER: Final = re.compile(r'"agentforge unchanged (\d+) ')
# What casting a text that is no integer fails with (invalid_text_representation): the checks' way
# of failing a statement (here and last_numbers.py).
BAD_INTEGER: Final = "22P02"
# Characters of statements held in one message: a larger batch's rows go with parameters.
MAX_HELD_CHARS: Final = 1 << 20


class HeldReplaceError(Exception):
    """A row a held statement replaced was not as its run expected (direct.py `Run.expected`):
    nothing of the held message was written; write the batch again, unheld."""


@dataclass(slots=True)
class Held:
    """Statements held for one message: the opening (its BEGIN) and row statements. `counted`: the
    held runs that count the rows they change, by the number their check fails with. `begun`:
    whether a message with the BEGIN went out (the transaction must then be ended)."""

    sql: list[str]
    counted: list[Callable[[int], None]] = field(default_factory=list)
    chars: int = 0
    begun: bool = False

    def add(self, sql: str, counted: list[Callable[[int], None]]) -> bool:
        """Hold `sql`, False when the message would grow past `MAX_HELD_CHARS`."""
        if self.chars + len(sql) > MAX_HELD_CHARS:
            return False
        self.sql.append(sql)
        self.chars += len(sql)
        self.counted.extend(counted)
        return True


def hold(conn: Connection, opening: str) -> None:
    """Hold `opening` (BEGIN and what goes with it), then what is added after it, for one message
    sent with the COMMIT (`commit`)."""
    if not event.contains(conn, "before_cursor_execute", _send_before):
        event.listen(conn, "before_cursor_execute", _send_before)
    conn.info[_HELD] = Held([opening], chars=len(opening))


def holding(conn: Connection) -> Held | None:
    """What is held on `conn`, if it is being held and not inside a savepoint (where a failure must
    surface inside it: what is held is sent first)."""
    held: Held | None = conn.info.get(_HELD)
    if held is not None and conn.in_nested_transaction():
        send_held(conn)
        return None
    return held


def send_held(conn: Connection) -> None:
    """Send what is held, if anything (what is added after it is held again)."""
    held = conn.info.get(_HELD)
    if held is not None and held.sql:
        _send(conn, held, None)


def commit(conn: Connection) -> None:
    """COMMIT the writer's transaction, with what is held in the same message."""
    held = conn.info.pop(_HELD, None)
    status = _send(conn, held or Held([], begun=True), "COMMIT")
    if status != "COMMIT":  # Postgres ends a failed transaction's COMMIT with ROLLBACK, no error
        raise DBAPIError("COMMIT", [], Exception(f"the transaction was rolled back ({status})"))


def rollback(conn: Connection) -> None:
    """End the writer's transaction without writing: a ROLLBACK, unless its BEGIN never went out."""
    held = conn.info.pop(_HELD, None)
    if held is not None and not held.begun:
        return
    driver: Any = conn.connection.dbapi_connection
    driver.run_async(lambda pg: pg.execute("ROLLBACK"))


def raise_translated(conn: Connection, driver: Any, exc: Exception, sql: str, params: list[Any]) -> None:
    """Raise `exc` as SQLAlchemy's path raises it (the adapter's DB-API error, wrapped)."""
    try:
        driver._handle_exception(exc)  # raises it as the adapter's DB-API error, as its cursor does
    except Exception as translated:
        error = conn.dialect.loaded_dbapi.Error
        raise DBAPIError.instance(sql, params, translated, error) from exc


def _send_before(conn: Connection, *_: Any) -> None:
    send_held(conn)


def _send(conn: Connection, held: Held, then: str | None) -> str:
    """Send `held`'s statements (and `then`) as one message; its status. A held run that changed
    no row fails as it would have alone (its `counted` told 0), others as SQLAlchemy's errors."""
    statements = [*held.sql, then] if then else held.sql
    sql = "; ".join(statements)
    counted = held.counted
    held.sql, held.counted, held.chars = [], [], 0
    held.begun = True
    driver: Any = conn.connection.dbapi_connection  # SQLAlchemy's adapter of the asyncpg connection
    try:
        status: str = driver.run_async(lambda pg: pg.execute(sql))
    except Exception as exc:
        number = _UNCHANGED_NUMBER.search(str(exc))
        if getattr(exc, "sqlstate", None) == BAD_INTEGER:
            if number is not None:
                counted[int(number[1])](0)
            if f'"{REPLACED}' in str(exc):
                raise HeldReplaceError("a row a held statement replaced was not as expected") from exc
        # Named, not quoted: the statements hold the rows' values.
        raise_translated(conn, driver, exc, f"/* {len(statements)} held statements */", [])
        raise
    for told in counted:
        told(1)  # held runs are of one row: it changed it
    return status
