"""The writer's row-writing statements sent straight to the driver (SQLite's, or asyncpg's).

A SQLAlchemy execution costs ~40-60 us of Python before the driver sees it (parameter processing, the
compiled-cache lookup, result set-up; on Postgres also the async adapter's cursor and its own
prepared-statement cache), several times what SQLite then takes to insert or update a row, and the
writer sends ~15 such statements per turn. `execute_rows` compiles a statement once per dialect and
set of parameter names, then hands the rows to the driver itself: SQLite's `executemany`, or on
Postgres asyncpg's `execute` (one row, a prepared statement it caches) or `executemany` (pipelined
in one round trip).

`execute_runs` sends several such runs in order; on Postgres, consecutive runs of INSERTs (with or
without ON CONFLICT) and one-row UPDATEs, of distinct tables, go as one statement, each in a WITH
taking `unnest`ed arrays (one per column) for its VALUES or its parameters: one round trip where
each run took one. What ordered statements could differ in does not arise between them: none sees
another's rows but through a foreign key, and Postgres checks those when the whole statement has
run; a run whose upsert would meet a row twice is given once per row (`Run.once`) or sent by
itself. A run that must know how many rows it changed (`Run.counted`) returns them in that
statement.

Only statements whose compiled form needs nothing from SQLAlchemy at execution time take this path:
no Python-side column defaults, no bind processors, no post-compile parameters, and every bound name
given by the rows. On Postgres only on a connection in AUTOCOMMIT mode whose transaction the caller
opened itself (the store's writer, batch.py), which SQLAlchemy's adapter then has no part in.
Anything else goes through `Connection.execute` as before. Driver errors are raised as SQLAlchemy's,
as that path raises them (`IntegrityError` for a violated constraint), so callers cannot tell the
paths apart. The statements run inside the connection's current transaction (or savepoint).

Where the writer holds its message (Postgres, held.py), a merged statement that needs no answer is
held instead: the EXECUTE of the statement prepared once per connection (`_prepared`), its arrays
written as literals (literals.py), its counted runs and the rows its reading runs expect
(`Run.expected`) checked in it (`_held_template`); `execute_or_hold` does the same for a single
statement. Its errors then surface where the held message is sent (held.py).
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlalchemy import Connection, Executable, Insert, Update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement

from agentforge.store.held import REPLACED, UNCHANGED, holding, raise_translated, send_held
from agentforge.store.literals import array_literal, text_literal

# (statement, bound names) -> the SQL and its positional names, or None: SQLAlchemy's path.
_Plan = tuple[str, tuple[str, ...]] | None
_plans: dict[tuple[Executable, str, tuple[str, ...]], _Plan] = {}
_MAX_PLANS: Final = 1024  # statements are module constants: a bound that is never reached
# A command's status as Postgres reports it, e.g. `INSERT 0 1`, `UPDATE 1`: its row count.
_STATUS_COUNT: Final = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")


Once = Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]


@dataclass(frozen=True, slots=True)
class ExpectedRow:
    """The row a run reading the row it replaces (`Run.replaced`) expects to find: none (`data`
    None), or one holding exactly `data`. Where the writer's message is held, its statement checks
    that instead of reading the row, and `replaced` is told `data` (`HeldReplaceError` when the row
    was otherwise: the batch is then written again, reading it)."""

    data: str | None = None


NEW: Final = ExpectedRow()  # no row: the run inserts it


@dataclass(slots=True)
class Run:
    """Rows for one statement, in order. `once`: the rows as an equivalent list that meets each row
    of the table at most once (an upsert given the same id twice), None when there is none; unset:
    the rows never meet the same row twice (plain INSERTs: a repeated key fails either way)."""

    statement: Executable
    rows: list[dict[str, Any]]
    once: Once | None = None
    # Called with the number of rows it changed once it ran (a run of one row: see `Writes`).
    counted: Callable[[int], None] | None = None
    # A run of one row into a table with `id`, `tenant_id` and `data` (Postgres, `reads_rows`):
    # called with the data of the row it replaces, as its statement found it (None: none); or,
    # held, with the data `expected` says, before its statement checks it: in an attempt that may
    # then be rolled back and written again, so it must only add work to the transaction.
    replaced: Callable[[str | None], None] | None = None
    # With `replaced`: what the row is expected to be, so a held statement checks it instead of
    # reading it (None: nothing expected, it is read).
    expected: ExpectedRow | None = None


def reads_rows(conn: Connection) -> bool:
    """Whether `Run.replaced` is taken here: Postgres, on the writer's own transaction."""
    return conn.dialect.name == "postgresql" and _direct(conn, "postgresql")


def execute_runs(conn: Connection, runs: Sequence[Run]) -> None:
    """Execute each run's statement once per row, run after run (see the module's docstring)."""
    dialect = conn.dialect.name
    if dialect != "postgresql" or not _direct(conn, dialect) or (len(runs) < 2 and holding(conn) is None):
        for run in runs:
            _alone(conn, run)
        return
    merged: list[_Merged] = []
    for run in runs:
        unnest = _unnest(conn, run.statement, run.rows)
        if unnest is not None and len(run.rows) > 1 and (unnest.updates or (unnest.upserts and not run.once)):
            unnest = None  # it might meet a row twice: one statement would fail or skip it
        rows = run.rows if unnest is None or run.once is None else run.once(run.rows)
        if unnest is None or rows is None or _clashes(unnest, rows, merged):
            _send_merged(conn, merged)
            merged = []
            if unnest is None or rows is None:
                _alone(conn, run)
                continue
        merged.append((run, unnest, rows))
    _send_merged(conn, merged)


def _clashes(unnest: _Unnest, rows: list[dict[str, Any]], merged: list[_Merged]) -> bool:
    """Whether a run could meet a row another run of the statement meets: runs of one table go
    together only as INSERTs of rows whose primary keys all differ."""
    for _, other, other_rows in merged:
        if other.table != unnest.table:
            continue
        if unnest.updates or other.updates or unnest.keys is None or other.keys != unnest.keys:
            return True
        mine = {tuple(row[name] for name in unnest.keys) for row in rows}
        if any(tuple(row[name] for name in unnest.keys) in mine for row in other_rows):
            return True
    return False


def _alone(conn: Connection, run: Run) -> None:
    if run.replaced is not None:  # a statement of its own that also reads the row
        unnest = _unnest(conn, run.statement, run.rows)
        if unnest is None or not reads_rows(conn):
            raise ValueError("a run reading the row it replaces needs Postgres' direct path")
        _send_merged(conn, [(run, unnest, run.rows)])
        return
    changed = execute_rows(conn, run.statement, run.rows)
    if run.counted is not None:
        run.counted(changed)


def execute_rows(conn: Connection, statement: Executable, rows: Sequence[dict[str, Any]]) -> int:
    """Execute `statement` once per row (all rows with the same keys); the rows it changed in all
    (-1 on Postgres for several rows: neither asyncpg's executemany nor SQLAlchemy's path counts them)."""
    dialect = conn.dialect.name
    if not rows or not _direct(conn, dialect):
        return int(conn.execute(statement, list(rows)).rowcount)
    plan = _cached_plan(conn, statement, tuple(rows[0]))
    if plan is None or any(row.keys() != rows[0].keys() for row in rows[1:]):
        return int(conn.execute(statement, list(rows)).rowcount)
    sql, order = plan
    params = [[row[name] for name in order] for row in rows]
    if dialect == "sqlite":
        return _sqlite(conn, sql, params)
    return _asyncpg(conn, sql, params)


def _cached_plan(conn: Connection, statement: Executable, names: tuple[str, ...]) -> _Plan:
    key = (statement, conn.dialect.name, names)
    try:
        return _plans[key]
    except KeyError:
        plan = _plan(conn, statement, names)
        if len(_plans) < _MAX_PLANS:
            _plans[key] = plan
        return plan


@dataclass(frozen=True, slots=True)
class _Unnest:
    """An INSERT taking one array per column instead of its VALUES (`head` and `tail`: the SQL
    around them), or an UPDATE taking its parameters from one row of such arrays (`head`: up to
    its WHERE, `tail`: from there, each placeholder `{}` for a column of that row); the type each
    array is cast to, the names of its columns in that order, and its table."""

    table: str
    head: str
    casts: tuple[str, ...]
    tail: str
    order: tuple[str, ...]
    updates: bool = False
    keys: tuple[str, ...] | None = None  # its table's primary key, when its rows name it

    @property
    def upserts(self) -> bool:
        return " ON CONFLICT " in self.tail

    def sql(self, first: int, counted: bool) -> str:
        """Its SQL with its arrays as placeholders from `first` on; `counted`: returning a row for
        each row it changed."""
        arrays = ", ".join(f"${first + index}::{cast}[]" for index, cast in enumerate(self.casts))
        returning = " RETURNING 1" if counted else ""
        if self.updates:
            names = ", ".join(f"c{index}" for index in range(len(self.casts)))
            columns = [f"v.c{index}" for index in range(len(self.casts))]
            assigned = self.head.count("{}")
            head, where = self.head.format(*columns[:assigned]), self.tail.format(*columns[assigned:])
            return f"{head} FROM unnest({arrays}) AS v({names}){where}{returning}"
        return f"{self.head} SELECT * FROM unnest({arrays}){self.tail}{returning}"


# A run with the statement taking arrays that it goes as, and its rows (given once).
_Merged = tuple[Run, _Unnest, list[dict[str, Any]]]

# An INSERT's single VALUES list as SQLAlchemy compiles it for asyncpg: every placeholder cast.
_VALUES: Final = re.compile(r" VALUES \((\$\d+::[A-Z]+(?:, \$\d+::[A-Z]+)*)\)")
# A placeholder of an UPDATE as SQLAlchemy compiles it for asyncpg.
_PLACEHOLDER: Final = re.compile(r"\$(\d+)::([A-Z]+)")
_unnests: dict[tuple[Executable, tuple[str, ...]], _Unnest | None] = {}
_merged_sql: dict[tuple[tuple[_Unnest, bool, bool], ...], str] = {}


def _unnest(conn: Connection, statement: Executable, rows: list[dict[str, Any]]) -> _Unnest | None:
    """The statement taking unnested arrays, or None: not an INSERT or UPDATE this path can send so."""
    if not rows or not isinstance(statement, Insert | Update):
        return None
    names = tuple(rows[0])
    if any(row.keys() != rows[0].keys() for row in rows[1:]):
        return None
    key = (statement, names)
    if key not in _unnests:
        unnest = _as_unnest(statement, _cached_plan(conn, statement, names))
        if len(_unnests) >= _MAX_PLANS:
            return unnest
        _unnests[key] = unnest
    return _unnests[key]


def _as_unnest(statement: Insert | Update, plan: _Plan) -> _Unnest | None:
    if plan is None:
        return None
    sql, order = plan
    if isinstance(statement, Update):
        return _update_unnest(statement, sql, order)
    found = list(_VALUES.finditer(sql))
    if len(found) != 1:
        return None
    places = found[0][1].split(", ")
    casts = tuple(place.split("::")[1] for place in places)
    head, tail = sql[: found[0].start()], sql[found[0].end() :]
    # Its placeholders all in the VALUES, in order: nothing else to number.
    if places != [f"${index}::{cast}" for index, cast in enumerate(casts, 1)] or "$" in head + tail:
        return None
    table: Any = statement.table
    keys = tuple(column.name for column in table.primary_key.columns)
    return _Unnest(table.name, head, casts, tail, order, keys=keys if set(keys) <= set(order) else None)


def _update_unnest(statement: Update, sql: str, order: tuple[str, ...]) -> _Unnest | None:
    """`UPDATE t SET a=$1::T, … WHERE … = $n::T` as taking its parameters from `v`, a row of
    unnested arrays; None when it is not of that form (a FROM or RETURNING of its own, placeholders
    other than $1…$n once each)."""
    places = _PLACEHOLDER.findall(sql)
    if (
        sql.count(" WHERE ") != 1
        or " FROM " in sql
        or " RETURNING " in sql
        or "{" in sql
        or "}" in sql
        or [int(number) for number, _ in places] != list(range(1, len(places) + 1))
        or len(places) != len(order)
    ):
        return None
    template = _PLACEHOLDER.sub("{}", sql)
    where = template.index(" WHERE ")
    casts = tuple(cast for _, cast in places)
    table = getattr(statement.table, "name", None)
    if not isinstance(table, str):
        return None
    return _Unnest(table, template[:where], casts, template[where:], order, updates=True)


def _send_merged(conn: Connection, merged: list[_Merged]) -> None:
    """One run as it is; several as one statement, each in a WITH, returning the counts of those
    counted and the replaced rows' data of those reading them (its snapshot is from before any
    of them ran, and no other run meets their rows). Held for the writer's message where it is
    being held (`hold`)."""
    if not merged or _hold_merged(conn, merged):
        return
    if len(merged) == 1 and merged[0][0].replaced is None:
        _alone(conn, merged[0][0])
        return
    key = tuple((unnest, run.counted is not None, run.replaced is not None) for run, unnest, _ in merged)
    sql = _merged_sql.get(key)
    if sql is None:
        parts, results, first = [], [], 1
        for index, (unnest, counted, _) in enumerate(key):
            parts.append(f"w{index} AS ({unnest.sql(first, counted)})")
            first += len(unnest.casts)
            if counted:
                results.append(f"(SELECT count(*) FROM w{index})")
        for unnest, _, reads in key:
            if reads:
                results.append(
                    f"(SELECT data FROM {unnest.table}"
                    f" WHERE id = ${first}::VARCHAR AND tenant_id = ${first + 1}::VARCHAR)"
                )
                first += 2
        sql = f"WITH {', '.join(parts)} SELECT {', '.join(results) or '1'}"
        if len(_merged_sql) < _MAX_PLANS:
            _merged_sql[key] = sql
    params: list[Any] = [[row[name] for row in rows] for _, unnest, rows in merged for name in unnest.order]
    for run, _, rows in merged:
        if run.replaced is not None:
            params += [rows[0]["id"], rows[0]["tenant_id"]]
    found = _asyncpg_row(conn, sql, params)
    for run, _, _ in merged:
        if run.counted is not None:
            run.counted(int(found.pop(0)))
    for run, _, _ in merged:
        if run.replaced is not None:
            run.replaced(found.pop(0))


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


def _asyncpg_row(conn: Connection, sql: str, params: list[Any]) -> list[Any]:
    """The one row `sql` returns, as a list."""
    send_held(conn)
    driver: Any = conn.connection.dbapi_connection  # SQLAlchemy's adapter of the asyncpg connection
    try:
        return list(driver.run_async(lambda pg: pg.fetchrow(sql, *params)))
    except Exception as exc:
        raise_translated(conn, driver, exc, sql, [params])
        raise


def _asyncpg(conn: Connection, sql: str, params: list[list[Any]]) -> int:
    send_held(conn)
    driver: Any = conn.connection.dbapi_connection  # SQLAlchemy's adapter of the asyncpg connection
    try:
        if len(params) == 1:
            status: str = driver.run_async(lambda pg: pg.execute(sql, *params[0]))
            found = _STATUS_COUNT.match(status or "")
            return int(found[1]) if found else -1
        driver.run_async(lambda pg: pg.executemany(sql, params))
        return -1
    except Exception as exc:
        raise_translated(conn, driver, exc, sql, params)
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


# --- held with the writer's message (Postgres, store/held.py) ----------------------------------------


def execute_or_hold(conn: Connection, statement: Executable, row: dict[str, Any]) -> None:
    """Execute `statement` with `row`'s values, or where the writer's message is being held (`hold`)
    hold it there when no answer is needed from it (its count is not known then)."""
    held = holding(conn) if conn.dialect.name == "postgresql" and _direct(conn, "postgresql") else None
    plan = None if held is None else _cached_plan(conn, statement, tuple(row))
    if held is not None and plan is not None:
        sql, order = plan
        values = [_scalar_literal(row[name]) for name in order]
        name = None if None in values else _prepared(conn, sql)
        if name is not None and held.add(f"EXECUTE {name}({', '.join(str(value) for value in values)})", []):
            return
    conn.execute(statement, row)


def _scalar_literal(value: Any) -> str | None:
    if value is None:
        return "NULL"
    if type(value) is int:
        return str(value)
    return text_literal(value) if type(value) is str else None


def _hold_merged(conn: Connection, merged: list[_Merged]) -> bool:
    """Hold `merged` as the EXECUTE of one statement prepared on this connection, its values
    written as literals, and tell each run reading the row it replaces the row it expects; False
    when it is not being held or cannot be (a run reading a row it expects nothing of needs the
    answer; a value no literal writes)."""
    held = holding(conn)
    if held is None or any(run.replaced is not None and run.expected is None for run, _, _ in merged):
        return False
    values: list[str] = []
    for _, unnest, rows in merged:
        for column, cast in zip(unnest.order, unnest.casts, strict=True):
            literal = array_literal([row[column] for row in rows], cast)
            if literal is None:
                return False
            values.append(literal)
    for run, _, rows in merged:
        if run.expected is not None:
            checked = _expected_literals(rows[0], run.expected)
            if checked is None:
                return False
            values += checked
    counted = [run.counted for run, _, _ in merged if run.counted is not None]
    if counted:
        values.append(str(len(held.counted)))  # the number its first counted run's check fails with
    name = _prepared(conn, *_held_template(tuple(_held_key(run, unnest) for run, unnest, _ in merged)))
    if name is None or not held.add(f"EXECUTE {name}({', '.join(values)})", counted):
        return False
    for run, _, _ in merged:  # told now: what they do with it (the audit's entries) is held after it
        if run.replaced is not None and run.expected is not None:
            run.replaced(run.expected.data)
    return True


# How a held run reads the row it replaces: not at all, expecting none, expecting its data.
_Expects = Literal["", "none", "data"]


def _held_key(run: Run, unnest: _Unnest) -> tuple[_Unnest, bool, _Expects]:
    expects: _Expects = ""
    if run.expected is not None:
        expects = "none" if run.expected.data is None else "data"
    return unnest, run.counted is not None, expects


def _expected_literals(row: dict[str, Any], expected: ExpectedRow) -> list[str] | None:
    """The id and tenant of the row a run expects, and the digest of the data it expects there;
    None when a literal cannot write them."""
    row_id, tenant = text_literal(row["id"]), text_literal(row["tenant_id"])
    if row_id is None or tenant is None:
        return None
    if expected.data is None:
        return [row_id, tenant]
    try:
        return [row_id, tenant, f"'{_digest(expected.data)}'"]
    except UnicodeEncodeError:  # a lone surrogate: Postgres never holds it so
        return None


def _digest(data: str) -> str:
    """sha256 of `data` in hex, as `_held_template`'s check computes it of the stored row."""
    return hashlib.sha256(data.encode()).hexdigest()


_PREPARED: Final = "agentforge.prepared"
_PREPARED_NEXT: Final = "agentforge.prepared_next"
_Key = tuple[tuple[_Unnest, bool, _Expects], ...]
_held_templates: dict[_Key, tuple[str, tuple[str, ...]]] = {}


def _prepared(conn: Connection, sql: str, types: tuple[str, ...] | None = None) -> str | None:
    """The name of `sql` prepared on this connection (`types`: its parameters'; None: as its casts
    say): prepared now the first time (a prepared statement outlives a rolled back transaction),
    None past the bound."""
    names: dict[str, str] = conn.info.setdefault(_PREPARED, {})
    name = names.get(sql)
    if name is not None:
        return name
    if len(names) >= _MAX_PLANS:
        return None
    # Each name used once on a connection, taken before the PREPARE goes out: one cancelled in
    # flight may have prepared it all the same.
    number = conn.info[_PREPARED_NEXT] = conn.info.get(_PREPARED_NEXT, 0) + 1
    name = f"agentforge_held_{number}"
    declared = "" if types is None else f" ({', '.join(types)})"
    prepare = f"PREPARE {name}{declared} AS {sql}"
    driver: Any = conn.connection.dbapi_connection  # SQLAlchemy's adapter of the asyncpg connection
    try:
        driver.run_async(lambda pg: pg.execute(prepare))
    except Exception as exc:
        raise_translated(conn, driver, exc, prepare, [])
        raise
    names[sql] = name
    return name


def _held_template(key: _Key) -> tuple[str, tuple[str, ...]]:
    """The statement for runs of `key` and its parameters' types: each run in a WITH taking its
    arrays; then, for each run reading the row it replaces, the row's id and tenant and the digest
    of the data expected there (when a row is); then, when any run is counted, the number the first
    one's check fails with. It selects 0, or fails naming the counted run that changed no row or
    that a row was not as expected."""
    found = _held_templates.get(key)
    if found is not None:
        return found
    parts, checks, types, first = [], [], [], 1
    for index, (unnest, counted, _) in enumerate(key):
        parts.append(f"w{index} AS ({unnest.sql(first, counted)})")
        types += [f"{cast}[]" for cast in unnest.casts]
        first += len(unnest.casts)
    for unnest, _, expects in key:
        if not expects:
            continue
        # As the statement finds the table: before any of its runs ran.
        row = f"SELECT 1 FROM {unnest.table} WHERE id = ${first} AND tenant_id = ${first + 1}"
        types += ["VARCHAR", "VARCHAR"]
        first += 2
        if expects == "data":
            row += f" AND encode(sha256(convert_to(data, 'UTF8')), 'hex') = ${first}"
            types.append("VARCHAR")
            first += 1
        unlike = f"NOT EXISTS ({row})" if expects == "data" else f"EXISTS ({row})"
        checks.append(f"WHEN {unlike} THEN '{REPLACED}' || pg_backend_pid()")
    counted_runs = [index for index, (_, counted, _) in enumerate(key) if counted]
    for number, index in enumerate(counted_runs):
        checks.append(
            f"WHEN (SELECT count(*) FROM w{index}) = 0"
            f" THEN '{UNCHANGED}' || (${first} + {number}) || ' ' || pg_backend_pid()"
        )
    if counted_runs:
        types.append("INTEGER")
    result = f"CAST(CASE {' '.join(checks)} ELSE '0' END AS integer)" if checks else "0"
    found = (f"WITH {', '.join(parts)} SELECT {result}", tuple(types))
    if len(_held_templates) < _MAX_PLANS:
        _held_templates[key] = found
    return found
