"""`agentforge keys create|list|revoke`: API keys, managed directly on the configured database.

The token is printed once, at creation; only its hash is stored. Revoking takes effect at once, also
for a server already running on the same database (keys are looked up on every request).
"""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from agentforge.cli.connect import Target, build_settings
from agentforge.cli.options import HELP_MARKUP, ConfigPath, DatabaseUrl, DataDir, Json
from agentforge.cli.render import format_time
from agentforge.identity.apikeys import ApiKey, mint_api_key
from agentforge.identity.model import InvalidTenantId, validate_tenant_id
from agentforge.identity.roles import UnknownRole, validate_roles
from agentforge.store import Store

T = TypeVar("T")

keys_app = typer.Typer(
    help="Create, list and revoke API keys.", no_args_is_help=True, rich_markup_mode=HELP_MARKUP
)


def _tenant(value: str) -> str:
    try:
        return validate_tenant_id(value)
    except InvalidTenantId as exc:
        raise typer.BadParameter(str(exc)) from exc


Tenant = Annotated[
    str, typer.Option("--tenant", help="The tenant the key belongs to.", callback=_tenant, show_default=False)
]


def _with_store(target: Target, action: Callable[[Store], Awaitable[T]]) -> T:
    settings = build_settings(target)

    async def main() -> T:
        store = await Store.open(settings.database_url)
        try:
            return await action(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _creator() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name (e.g. a container's anonymous uid)
        return "cli"


@keys_app.command("create")
def create(
    tenant: Tenant,
    name: Annotated[str, typer.Option("--name", help="What the key is for.", show_default=False)],
    role: Annotated[
        list[str] | None, typer.Option("--role", help="admin or member; repeat for both [default: member].")
    ] = None,
    as_json: Json = False,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Create a key and print its token (shown this once only)."""
    if not name.strip():
        raise typer.BadParameter("must not be empty", param_hint="--name")
    try:
        roles = validate_roles(role or [])
    except UnknownRole as exc:
        raise typer.BadParameter(str(exc), param_hint="--role") from exc
    minted = mint_api_key(tenant, name.strip(), roles, _creator())
    target = Target(config_path=config, data_dir=data_dir, database_url=db)
    key = _with_store(target, lambda store: store.create_api_key(minted.stored))
    if as_json:
        typer.echo(json.dumps({**_key_json(key), "token": minted.token}, indent=2))
        return
    # Only the token goes to stdout, so `TOKEN=$(agentforge keys create ...)` captures just that.
    typer.echo(f"created {key.id} for tenant {key.tenant} ({', '.join(sorted(key.roles))})", err=True)
    typer.echo("token (shown this once, store it now):", err=True)
    typer.echo(minted.token)


@keys_app.command("list")
def list_keys(
    tenant: Tenant,
    as_json: Json = False,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """List a tenant's keys (never their secrets), revoked ones included."""
    target = Target(config_path=config, data_dir=data_dir, database_url=db)
    keys = _with_store(target, lambda store: store.list_api_keys(tenant))
    if as_json:
        typer.echo(json.dumps([_key_json(key) for key in keys], indent=2))
    elif keys:
        Console(highlight=False).print(_keys_table(keys))
    else:
        typer.echo(f"no API keys in tenant {tenant}")


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (key_...).", show_default=False)],
    tenant: Tenant,
    config: ConfigPath = None,
    data_dir: DataDir = None,
    db: DatabaseUrl = None,
) -> None:
    """Revoke a key: it stops working at once."""
    target = Target(config_path=config, data_dir=data_dir, database_url=db)
    key = _with_store(target, lambda store: store.revoke_api_key(tenant, key_id, actor=_creator()))
    if key is None:
        typer.echo(f"error: tenant {tenant} has no API key {key_id}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {key.id} ({key.name}) at {format_time(key.time_revoked)}")


def _key_json(key: ApiKey) -> dict[str, object]:
    return {
        "id": key.id,
        "tenant": key.tenant,
        "name": key.name,
        "roles": sorted(key.roles),
        "createdBy": key.created_by,
        "timeCreated": key.time_created,
        "timeRevoked": key.time_revoked,
    }


def _keys_table(keys: Sequence[ApiKey]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    # The id is what `keys revoke` needs: never shortened.
    table.add_column("ID", no_wrap=True, min_width=len(keys[0].id) if keys else None)
    for column in ("NAME", "ROLES", "CREATED", "CREATED BY", "REVOKED"):
        table.add_column(column, overflow="fold")
    for key in keys:
        roles = ", ".join(sorted(key.roles))
        revoked = format_time(key.time_revoked) if key.revoked else "-"
        table.add_row(key.id, key.name, roles, format_time(key.time_created), key.created_by, revoked)
    return table
