"""`agentforge audit verify|checkpoint|public-key`: check the audit chains, and anchor them outside
the database with signed checkpoints (store/audit_checkpoints.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentforge.cli.connect import Target, build_settings
from agentforge.cli.options import HELP_MARKUP, ConfigPath, DataDir
from agentforge.config import Settings
from agentforge.runtime.checkpoints import chains_url, checkpoint_file, checkpoint_key, take_checkpoint
from agentforge.store.audit_checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointKey,
    read_checkpoints,
    verified,
)
from agentforge.store.audit_verify import AuditDatabaseError, ChainReport, verify_database

audit_app = typer.Typer(
    help="Inspect the tamper-evident audit log.", no_args_is_help=True, rich_markup_mode=HELP_MARKUP
)


# No envvar, unlike the shared --db: AGENTFORGE_DATABASE_URL names the runtime role, which (on Postgres)
# sees no tenant's chain; the settings pick the owner URL when one is configured.
VerifyUrl = Annotated[
    str | None,
    typer.Option(
        "--db", help="Database URL to verify [default: the configured owner URL, else the server's]."
    ),
]
PublicKey = Annotated[
    Path | None,
    typer.Option(
        "--public-key",
        help="PEM key the checkpoints must be signed with [default: the configured checkpoint key].",
        dir_okay=False,
    ),
]


@audit_app.command("verify")
def verify(
    db: VerifyUrl = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's chain.")] = None,
    checkpoints: Annotated[
        Path | None,
        typer.Option(
            "--checkpoints",
            help="Signed checkpoints (JSON lines) the chains must still match: detects deleted tails "
            "and re-hashed chains.",
            dir_okay=False,
        ),
    ] = None,
    public_key: PublicKey = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
) -> None:
    """Recompute every chain's hashes (and compare them with signed checkpoints). Exit 0 when all are
    intact, 1 at the first broken row (or when the database or checkpoints cannot be read). On
    Postgres only the owner sees every tenant: without --db the configured owner URL
    (`database.owner_url`) is used when there is one."""
    settings = build_settings(Target(config_path=config, data_dir=data_dir))
    url = db or _default_url(settings, tenant)
    try:
        anchors = _checkpoints(settings, checkpoints, public_key) if checkpoints is not None else []
        reports = verify_database(url, tenant, anchors)
    except (AuditDatabaseError, CheckpointError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if not reports:
        typer.echo("no audit entries")
    for report in reports:
        typer.echo(describe(report))
    raise typer.Exit(0 if all(report.ok for report in reports) else 1)


def _checkpoints(settings: Settings, path: Path, public_key: Path | None) -> list[Checkpoint]:
    if public_key is not None:
        try:
            key = CheckpointKey.from_pem(public_key.read_bytes(), where=str(public_key))
        except OSError as exc:
            raise CheckpointError(f"cannot read {public_key}: {exc.strerror or exc}") from None
    else:
        key = checkpoint_key(settings, create=False)
    return verified(read_checkpoints(path), key, path)


@audit_app.command("checkpoint")
def checkpoint(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Append the checkpoint to this file [default: the configured checkpoint file].",
            dir_okay=False,
        ),
    ] = None,
    db: VerifyUrl = None,
    config: ConfigPath = None,
    data_dir: DataDir = None,
) -> None:
    """Sign every tenant's chain head and append it to the checkpoint file (JSON lines, 0600). The
    signing key (audit.checkpoint_key or audit.checkpoint_key_file) is created on first use."""
    settings = build_settings(Target(config_path=config, data_dir=data_dir))
    destination = out or checkpoint_file(settings)
    try:
        taken = take_checkpoint(settings, destination, db or chains_url(settings))
    except (AuditDatabaseError, CheckpointError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    heads = ", ".join(f"{tenant} at seq {head.seq}" for tenant, head in taken.heads.items()) or "no chains"
    typer.echo(f"checkpoint written to {destination}: {heads}")


@audit_app.command("public-key")
def public_key_command(config: ConfigPath = None, data_dir: DataDir = None) -> None:
    """Print the checkpoint key's public half (PEM), for `verify --public-key` elsewhere."""
    settings = build_settings(Target(config_path=config, data_dir=data_dir))
    try:
        key = checkpoint_key(settings, create=False)
    except CheckpointError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(key.public_pem(), nl=False)


def _default_url(settings: Settings, tenant: str | None) -> str:
    # One tenant's chain is readable by the runtime role (it sets that tenant); all of them, by the owner.
    if tenant is None and settings.database_owner_url:
        return settings.database_owner_url
    return settings.database_url


def describe(report: ChainReport) -> str:
    """One line per tenant: `ok` with the chain's length, or `BROKEN` naming the first broken row."""
    if report.broken is None:
        anchored = f" (matches {report.anchored} checkpointed head(s))" if report.anchored else ""
        return f"ok      tenant {report.tenant_id}: {report.length} entries{anchored}"
    row = report.broken
    where = f"seq {row.seq} (id {row.id})" if row.id is not None else f"seq {row.seq}"
    return (
        f"BROKEN  tenant {report.tenant_id}: {where}: {row.reason} ({report.length} entries intact before it)"
    )
