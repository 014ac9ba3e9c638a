"""Database URLs (which driver each maps to, what is refused) and how SQLite connections are set up."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentforge.store import Store, parse_database_url, sqlite_url
from agentforge.store.engine import sqlite_engine


def test_default_sqlite_url_is_agentforge_db_in_the_data_dir(tmp_path: Path) -> None:
    target = parse_database_url(sqlite_url(tmp_path))

    assert target.dialect == "sqlite"
    assert target.url.drivername == "sqlite+pysqlite"
    assert target.sqlite_path == tmp_path / "agentforge.db"


@pytest.mark.parametrize("url", ["sqlite:///relative/x.db", "sqlite+pysqlite:////abs/x.db"])
def test_sqlite_file_urls_use_pysqlite(url: str) -> None:
    assert parse_database_url(url).url.drivername == "sqlite+pysqlite"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_in_memory_sqlite_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="In-memory SQLite"):
        parse_database_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p@db:5432/forge",
        "postgres://u:p@db:5432/forge",
        "postgresql+asyncpg://u:p@db:5432/forge",
    ],
)
def test_postgres_urls_use_asyncpg(url: str) -> None:
    target = parse_database_url(url)

    assert target.dialect == "postgresql"
    assert target.url.render_as_string(hide_password=False) == "postgresql+asyncpg://u:p@db:5432/forge"
    assert target.schema is None


def test_postgres_schema_parameter_is_taken_out_of_the_driver_url() -> None:
    target = parse_database_url("postgresql://u@db/forge?schema=tenant_a&ssl=require")

    assert target.schema == "tenant_a"
    assert dict(target.url.query) == {"ssl": "require"}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@db/forge?schema=bad-name", "Invalid schema name"),
        ("postgresql://u@db/forge?schema=a&schema=b", "once"),
        ("mysql://u@db/forge", "Unsupported database URL scheme"),
        ("postgresql+psycopg://u@db/forge", "Unsupported database URL scheme"),
        ("not a url", "Invalid database URL"),
        ("sqlite:///x.db?mode=ro", "no query parameters"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_database_url(url)


def _locked_for_other_writers(path: Path) -> bool:
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc)
        return True
    else:
        other.execute("ROLLBACK")
        return False
    finally:
        other.close()


@pytest.mark.parametrize(("begin", "locks"), [("BEGIN IMMEDIATE", True), ("BEGIN", False)])
def test_sqlite_transactions_open_with_the_given_begin(tmp_path: Path, begin: str, locks: bool) -> None:
    target = parse_database_url(sqlite_url(tmp_path))
    engine = sqlite_engine(target, pool_size=1, begin=begin)
    try:
        with engine.connect() as conn:
            assert not engine._has_events  # no per-statement event dispatch on the hot path
            assert engine.dialect._supports_statement_cache  # compiled statements are cached
            pragmas = [conn.exec_driver_sql(f"PRAGMA {name}").scalar() for name in _PRAGMAS]
            assert pragmas == ["wal", 1, 5000, 1]  # synchronous=1 is NORMAL
            conn.rollback()
            with conn.begin():
                assert _locked_for_other_writers(target.sqlite_path) is locks
            assert _locked_for_other_writers(target.sqlite_path) is False
    finally:
        engine.dispose()


_PRAGMAS = ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")


async def test_only_one_live_store_owns_the_database(database_url: str) -> None:
    first = await Store.open(database_url)
    second = await Store.open(database_url)
    try:
        assert await first.claim_ownership() is True
        assert await first.claim_ownership() is True  # kept, not re-taken
        assert await second.claim_ownership() is False
        await first.close()
        assert await second.claim_ownership() is True
    finally:
        await first.close()
        await second.close()
