"""`agentforge doctor`: check a deployment and print a table; exit 1 when a check fails."""

from __future__ import annotations

from collections.abc import Sequence

import typer
from rich.console import Console
from rich.table import Table

from agentforge.cli.connect import Target, build_settings
from agentforge.cli.options import ConfigPath, DatabaseUrl, DataDir
from agentforge.doctor.result import CheckResult
from agentforge.doctor.run import deployment_checks

_STYLES = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def doctor(config: ConfigPath = None, data_dir: DataDir = None, db: DatabaseUrl = None) -> None:
    """Check the database, row-level security, roles, audit chains and checkpoints, the command
    sandbox, bind/auth, data dir and keys."""
    settings = build_settings(Target(config_path=config, data_dir=data_dir, database_url=db))
    results = deployment_checks(settings)
    print_results(results)
    raise typer.Exit(1 if any(result.failed for result in results) else 0)


def print_results(results: Sequence[CheckResult]) -> None:
    table = Table(title="Agent Forge deployment checks")
    table.add_column("status")
    table.add_column("check")
    table.add_column("detail", overflow="fold")
    for result in results:
        style = _STYLES[result.status]
        table.add_row(f"[{style}]{result.status.upper()}[/{style}]", result.name, result.detail)
    Console(width=140).print(table)
