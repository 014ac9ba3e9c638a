"""`agentforge audit verify`: walk every audit chain in the database and name the first broken row."""

from __future__ import annotations

from typing import Annotated

import typer

from agentforge.cli.connect import Target, build_settings
from agentforge.cli.options import ConfigPath, DataDir
from agentforge.config import Settings
from agentforge.store.audit_verify import AuditDatabaseError, ChainReport, verify_database

audit_app = typer.Typer(help="Inspect the tamper-evident audit log.", no_args_is_help=True)


# No envvar, unlike the shared --db: AGENTFORGE_DATABASE_URL names the runtime role, which (on Postgres)
# sees no tenant's chain; the settings pick the owner URL when one is configured.
VerifyUrl = Annotated[
    str | None,
    typer.Option(
        "--db", help="Database URL to verify [default: the configured owner URL, else the server's]."
    ),
]


@audit_app.command("verify")
def verify(
    db: VerifyUrl = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's chain.")] = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
) -> None:
    """Recompute every chain's hashes. Exit 0 when all are intact, 1 at the first broken row (or when
    the database cannot be read). On Postgres only the owner sees every tenant: without --db the
    configured owner URL (`database.owner_url`) is used when there is one."""
    url = db or _default_url(build_settings(Target(config_path=config, data_dir=data_dir)), tenant)
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


def _default_url(settings: Settings, tenant: str | None) -> str:
    # One tenant's chain is readable by the runtime role (it sets that tenant); all of them, by the owner.
    if tenant is None and settings.database_owner_url:
        return settings.database_owner_url
    return settings.database_url


def describe(report: ChainReport) -> str:
    """One line per tenant: `ok` with the chain's length, or `BROKEN` naming the first broken row."""
    if report.broken is None:
        return f"ok      tenant {report.tenant_id}: {report.length} entries"
    row = report.broken
    return (
        f"BROKEN  tenant {report.tenant_id}: seq {row.seq} (id {row.id}): {row.reason} "
        f"({report.length} entries intact before it)"
    )
