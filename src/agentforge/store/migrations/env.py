"""Alembic environment for the store.

The store runs it with a connection in `config.attributes["connection"]` (see `store/migrate.py`).
Developers can also run `alembic upgrade head` / `alembic revision --autogenerate` with the repo's
alembic.ini; the URL then comes from `sqlalchemy.url` or `AGENTFORGE_DATABASE_URL`.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from agentforge.store.engine import parse_database_url
from agentforge.store.migrate import create_schema_if_missing, run_with_connection
from agentforge.store.schema import metadata


def run_migrations(conn: Connection) -> None:
    context.configure(
        connection=conn,
        target_metadata=metadata,
        # The store's SQLite engine emits BEGIN itself, so SQLite DDL is transactional too and a
        # failed upgrade leaves nothing half done.
        transactional_ddl=True,
        render_as_batch=conn.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def configured_url() -> str:
    url = context.config.get_main_option("sqlalchemy.url") or os.environ.get("AGENTFORGE_DATABASE_URL")
    if not url:
        raise RuntimeError("Set sqlalchemy.url in alembic.ini or AGENTFORGE_DATABASE_URL")
    return url


def run_offline() -> None:
    target = parse_database_url(configured_url())
    context.configure(url=target.url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_standalone() -> None:
    target = parse_database_url(configured_url())

    def create_and_migrate(conn: Connection) -> None:
        if target.schema is not None:
            create_schema_if_missing(conn, target.schema)
        run_migrations(conn)

    run_with_connection(target, create_and_migrate)


given: Connection | None = context.config.attributes.get("connection")
if given is not None:
    run_migrations(given)
elif context.is_offline_mode():
    run_offline()
else:
    run_standalone()
