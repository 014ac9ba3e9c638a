"""The `agentforge` typer app (console script `agentforge = "agentforge.cli.main:entry"`).

Each command's module is imported when that command runs (or help lists it): `serve` does not load the
HTTP client, rich or the doctor's checks that only the other commands use.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from difflib import get_close_matches
from typing import Annotated, Any

import typer
from typer import _click as click  # typer vendors click: its commands are these
from typer._click.exceptions import NoSuchOption
from typer.core import TyperCommand, TyperGroup

from agentforge.cli import gcpause
from agentforge.cli.options import HELP_MARKUP
from agentforge.version import __version__

# name -> (module, attribute): a command function, or the typer app of a group of commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("agentforge.cli.serve", "serve"),
    "run": ("agentforge.cli.run", "run"),
    "doctor": ("agentforge.cli.doctor", "doctor"),
    "session": ("agentforge.cli.session", "session_app"),
    "permission": ("agentforge.cli.permission", "permission_app"),
    "question": ("agentforge.cli.question", "question_app"),
    "keys": ("agentforge.cli.keys", "keys_app"),
    "audit": ("agentforge.cli.audit", "audit_app"),
    "db": ("agentforge.cli.db", "db_app"),
}
# What `agentforge --help` lists for each command: its help text, kept here so that listing imports
# none of them (`serve` alone brings the server stack: ~1 s). tests/cli/test_main.py compares them.
SUMMARIES: dict[str, str] = {
    "serve": "Run the Agent Forge server.",
    "run": "Send a message and stream the agent's answer.",
    "doctor": "Check the database, row-level security, roles, audit chains and checkpoints, the command\n"
    "sandbox, bind/auth, data dir and keys.",
    "session": "List, inspect, export, copy and remove sessions.",
    "permission": "List and answer permission requests waiting on a server.",
    "question": "List, answer and dismiss questions waiting on a server.",
    "keys": "Create, list and revoke API keys.",
    "audit": "Inspect the tamper-evident audit log.",
    "db": "Database administration.",
}
# Commands that start the collector again themselves once ready (gcpause.py): `serve` when listening,
# `run` when its server is up (cli/connect.py). Any other once its module is imported.
READIES_ITSELF = frozenset({"serve", "run"})
# Epilogs of single commands, by name: (module, attribute).
EPILOGS: dict[str, tuple[str, str]] = {"run": ("agentforge.cli.run", "RUN_EPILOG")}


def load_command(name: str) -> click.Command:
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        group.name = name  # as `add_typer(name=...)` would: help lists groups by name
        return group
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=HELP_MARKUP)
    epilog = None
    if name in EPILOGS:
        epilog_module, epilog_attribute = EPILOGS[name]
        epilog = getattr(importlib.import_module(epilog_module), epilog_attribute)
    single.command(name, epilog=epilog)(target)
    return typer.main.get_command(single)


class _LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands by name, each built the first time it is looked up."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self._loaded[name] = load_command(name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        raise TypeError("the agentforge commands are listed in COMMANDS")

    def __delitem__(self, name: str) -> None:
        raise TypeError("the agentforge commands are listed in COMMANDS")

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


def suggest_close_options(exc: NoSuchOption) -> None:
    """Suggest only options whose names are close to the unknown one. click compares them with their
    dashes, so `--bogus` looked close to `--verbose`; the names alone, with difflib's same cutoff."""
    ctx = exc.ctx
    if ctx is None:
        return
    names = {
        name.lstrip("-"): name
        for param in ctx.command.get_params(ctx)
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    }
    exc.possibilities = [names[close] for close in get_close_matches(exc.option_name.lstrip("-"), names)]


class LazyGroup(TyperGroup):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands()
        self._listing = False

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)  # TyperGroup's lists (so loads) every command

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if self._listing and cmd_name in SUMMARIES:
            # Listed by name and help text only: a stand-in, the command's module left unimported.
            return TyperCommand(cmd_name, help=SUMMARIES[cmd_name])
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name not in READIES_ITSELF:
            gcpause.resume()
        return name, command, rest

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as exc:
            suggest_close_options(exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NoSuchOption as exc:  # raised by a command's (or a group's command's) parsing
            suggest_close_options(exc)
            raise


app = typer.Typer(
    name="agentforge",
    help="Agent Forge: LLM agents as durable multi-turn sessions.",
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=HELP_MARKUP,
)


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


def entry() -> None:
    """The console script (and `python -m agentforge.cli`): the app, with the garbage collector paused
    while the command starts (gcpause.py)."""
    gcpause.pause()
    app(prog_name="agentforge")
