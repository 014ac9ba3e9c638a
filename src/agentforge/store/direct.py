"""The writer's row-writing statements sent straight to the driver (SQLite's, or asyncpg's).

A SQLAlchemy execution costs ~40-60 us of Python before the driver sees it (parameter processing, the
compiled-cache lookup, result set-up; on Postgres also the async adapter's cursor and its own
prepared-statement cache), several times what SQLite then takes to insert or update a row, and the
writer sends ~15 such statements per turn. `execute_rows` compiles a statement once per dialect and
set of parameter names, then hands the rows to the driver itself: SQLite's `executemany`, or on
Postgres asyncpg's `execute` (one row, a prepared statement it caches) or `executemany` (pipelined
in one round trip).

Only statements whose compiled form needs nothing from SQLAlchemy at execution time take this path:
no Python-side column defaults, no bind processors, no post-compile parameters, and every bound name
given by the rows. On Postgres only on a connection in AUTOCOMMIT mode whose transaction the caller
opened itself (the store's writer, batch.py), which SQLAlchemy's adapter then has no part in.
Anything else goes through `Connection.execute` as before. Driver errors are raised as SQLAlchemy's,
as that path raises them (`IntegrityError` for a violated constraint), so callers cannot tell the
paths apart. The statements run inside the connection's current transaction (or savepoint).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import Connection, Executable
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement

# (statement, bound names) -> the SQL and its positional names, or None: SQLAlchemy's path.
_Plan = tuple[str, tuple[str, ...]] | None
_plans: dict[tuple[Executable, str, tuple[str, ...]], _Plan] = {}
_MAX_PLANS: Final = 1024  # statements are module constants: a bound that is never reached
# A command's status as Postgres reports it, e.g. `INSERT 0 1`, `UPDATE 1`: its row count.
_STATUS_COUNT: Final = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")


def execute_rows(conn: Connection, statement: Executable, rows: Sequence[dict[str, Any]]) -> int:
    """Execute `statement` once per row (all rows with the same keys); the rows it changed in all
    (-1 on Postgres for several rows: neither asyncpg's executemany nor SQLAlchemy's path counts them)."""
    dialect = conn.dialect.name
    if not rows or not _direct(conn, dialect):
        return int(conn.execute(statement, list(rows)).rowcount)
    names = tuple(rows[0])
    key = (statement, dialect, names)
    try:
        plan = _plans[key]
    except KeyError:
        plan = _plan(conn, statement, names)
        if len(_plans) < _MAX_PLANS:
            _plans[key] = plan
    if plan is None or any(row.keys() != rows[0].keys() for row in rows[1:]):
        return int(conn.execute(statement, list(rows)).rowcount)
    sql, order = plan
    params = [[row[name] for name in order] for row in rows]
    if dialect == "sqlite":
        return _sqlite(conn, sql, params)
    return _asyncpg(conn, sql, params)


def _direct(conn: Connection, dialect: str) -> bool:
    if dialect == "sqlite":
        return True
    return dialect == "postgresql" and conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"


def _sqlite(conn: Connection, sql: str, params: list[list[Any]]) -> int:
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        if len(params) == 1:
            cursor.execute(sql, params[0])
        else:
            cursor.executemany(sql, params)
        return int(cursor.rowcount)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(sql, params, exc, sqlite3.Error) from exc
    finally:
        cursor.close()


def _asyncpg(conn: Connection, sql: str, params: list[list[Any]]) -> int:
    driver: Any = conn.connection.dbapi_connection  # SQLAlchemy's adapter of the asyncpg connection
    try:
        if len(params) == 1:
            status: str = driver.run_async(lambda pg: pg.execute(sql, *params[0]))
            found = _STATUS_COUNT.match(status or "")
            return int(found[1]) if found else -1
        driver.run_async(lambda pg: pg.executemany(sql, params))
        return -1
    except Exception as exc:
        try:
            driver._handle_exception(exc)  # raises it as the adapter's DB-API error, as its cursor does
        except Exception as translated:
            error = conn.dialect.loaded_dbapi.Error
            raise DBAPIError.instance(sql, params, translated, error) from exc
        raise


def _plan(conn: Connection, statement: Executable, names: tuple[str, ...]) -> _Plan:
    if not isinstance(statement, ClauseElement):
        return None
    compiled: Any = statement.compile(dialect=conn.dialect, column_keys=list(names))
    order = compiled.positiontup
    if (
        order is None
        or compiled.insert_prefetch
        or compiled.update_prefetch
        or compiled.literal_execute_params
        or compiled.post_compile_params
        or compiled.returning
        or any(compiled._bind_processors.get(name) for name in order)
        or set(order) != set(names)
    ):
        return None
    return str(compiled.string), tuple(order)
