"""The store: schema, migrations, the ordered writer with group commit, the projector, and reads.

SQLite (a writer thread plus reader threads over pysqlite) or Postgres (asyncpg), one schema and one
set of projector and query code for both.
"""

from agentforge.store.batch import StoreWriteError
from agentforge.store.engine import parse_database_url, sqlite_url
from agentforge.store.migrate import MigrationError
from agentforge.store.queries import decode_cursor, encode_cursor
from agentforge.store.store import Store
from agentforge.store.writer import Publish

__all__ = [
    "MigrationError",
    "Publish",
    "Store",
    "StoreWriteError",
    "decode_cursor",
    "encode_cursor",
    "parse_database_url",
    "sqlite_url",
]
