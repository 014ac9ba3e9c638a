"""`agentforge db migrate`: upgrade the database as its owner and grant the server's runtime role.

For operators who keep the owner's credentials away from the server: run this once per release with
the owner's URL, then run the server with only the runtime role's URL (`AGENTFORGE_DATABASE_URL`).
The server then finds the schema at head and never needs DDL rights.
"""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from sqlalchemy.exc import SQLAlchemyError

from agentforge.cli.options import HELP_MARKUP
from agentforge.config import ENV_DATABASE_OWNER_URL
from agentforge.store.migrate import head_revision, upgrade_to_head

db_app = typer.Typer(help="Database administration.", no_args_is_help=True, rich_markup_mode=HELP_MARKUP)


@db_app.command("migrate")
def migrate(
    owner_db: Annotated[
        str,
        typer.Option(
            "--owner-db",
            envvar=ENV_DATABASE_OWNER_URL,
            help="URL of the role that owns the tables (postgresql://... or sqlite:///...).",
            show_default=False,
        ),
    ],
    runtime_role: Annotated[
        str | None,
        typer.Option(
            "--runtime-role",
            help="Postgres role the server runs as: granted exactly what it needs, nothing more.",
        ),
    ] = None,
) -> None:
    """Upgrade the schema to the newest revision; with --runtime-role, grant that role its privileges."""
    if runtime_role is not None and not runtime_role.strip():
        _fail("--runtime-role must not be empty", code=2)
    try:
        upgrade_to_head(owner_db, runtime_role=runtime_role)
    except ValueError as exc:
        _fail(str(exc), code=2)
    except (SQLAlchemyError, OSError) as exc:
        _fail(f"migration failed: {_first_line(exc)}", code=1)
    typer.echo(f"database at revision {head_revision()}")
    if runtime_role is not None:
        typer.echo(f"granted the runtime privileges to role {runtime_role}")


def _fail(message: str, *, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _first_line(exc: BaseException) -> str:
    # SQLAlchemy errors carry the statement and parameters after the first line.
    lines = str(getattr(exc, "orig", exc)).splitlines()
    return lines[0] if lines else type(exc).__name__
