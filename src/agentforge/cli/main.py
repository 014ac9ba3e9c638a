"""The `agentforge` typer app (console script `agentforge = "agentforge.cli.main:app"`)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentforge.cli.audit import audit_app
from agentforge.cli.db import db_app
from agentforge.cli.doctor import doctor
from agentforge.cli.keys import keys_app
from agentforge.cli.options import HELP_MARKUP
from agentforge.cli.permission import permission_app
from agentforge.cli.question import question_app
from agentforge.cli.run import RUN_EPILOG, run
from agentforge.cli.serve import serve
from agentforge.cli.session import session_app
from agentforge.version import __version__

app = typer.Typer(
    name="agentforge",
    help="Agent Forge: LLM agents as durable multi-turn sessions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=HELP_MARKUP,
)
app.command("serve")(serve)
app.command("run", epilog=RUN_EPILOG)(run)
app.command("doctor")(doctor)
app.add_typer(session_app, name="session")
app.add_typer(permission_app, name="permission")
app.add_typer(question_app, name="question")
app.add_typer(keys_app, name="keys")
app.add_typer(audit_app, name="audit")
app.add_typer(db_app, name="db")


def _print_version(requested: bool) -> None:
    if requested:
        typer.echo(f"agentforge {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Agent Forge: LLM agents as durable multi-turn sessions."""
