"""`agentforge audit verify`: walk every audit chain in the database and name the first broken row."""

from __future__ import annotations

from typing import Annotated

import typer

from agentforge.cli.connect import Target, build_settings
from agentforge.cli.options import ConfigPath, DatabaseUrl, DataDir
from agentforge.store.audit_verify import AuditDatabaseError, ChainReport, verify_database

audit_app = typer.Typer(help="Inspect the tamper-evident audit log.", no_args_is_help=True)


@audit_app.command("verify")
def verify(
    db: DatabaseUrl = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's chain.")] = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
) -> None:
    """Recompute every chain's hashes. Exit 0 when all are intact, 1 at the first broken row (or when
    the database cannot be read). On Postgres, use the owner's URL to see every tenant."""
    url = db or build_settings(Target(config_path=config, data_dir=data_dir)).database_url
    try:
        reports = verify_database(url, tenant)
    except AuditDatabaseError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if not reports:
        typer.echo("no audit entries")
    for report in reports:
        typer.echo(describe(report))
    raise typer.Exit(0 if all(report.ok for report in reports) else 1)


def describe(report: ChainReport) -> str:
    """One line per tenant: `ok` with the chain's length, or `BROKEN` naming the first broken row."""
    if report.broken is None:
        return f"ok      tenant {report.tenant_id}: {report.length} entries"
    row = report.broken
    return (
        f"BROKEN  tenant {report.tenant_id}: seq {row.seq} (id {row.id}): {row.reason} "
        f"({report.length} entries intact before it)"
    )
