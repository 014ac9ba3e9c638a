"""`agentforge keys create|list|revoke` on the configured database, and a created key at work."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agentforge.client import AgentForgeError, AsyncAgentForge, StreamingASGITransport
from agentforge.config import load_settings
from agentforge.server.app import create_app
from tests.cli.conftest import Cli


@asynccontextmanager
async def _authenticated_app(cli: Cli, token: str) -> AsyncIterator[AsyncAgentForge]:
    """The app on the CLI's database with authentication required, called with `token`."""
    settings = load_settings(
        config_path=cli.config, data_dir=cli.data_dir, config_override={"auth": {"required": True}}
    )
    transport = StreamingASGITransport(create_app(settings))
    async with (
        transport.lifespan(),
        AsyncAgentForge("http://forge.test", transport=transport, token=token) as client,
    ):
        yield client


async def _create(cli: Cli, *options: str) -> tuple[str, str]:
    result = await cli.run_local("keys", "create", "--tenant", "acme", "--name", "ci", *options)
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert token.startswith("afk.acme.key_") and "\n" not in token
    key_id = token.split(".")[2]
    assert f"created {key_id} for tenant acme" in result.stderr
    return key_id, token


async def test_create_list_revoke(cli: Cli) -> None:
    key_id, token = await _create(cli, "--role", "admin", "--role", "member")
    secret = token.split(".")[3]

    listed = await cli.run_local("keys", "list", "--tenant", "acme", "--json")
    assert listed.exit_code == 0, listed.output
    [entry] = json.loads(listed.stdout)
    assert (entry["id"], entry["name"], entry["roles"], entry["timeRevoked"]) == (
        key_id,
        "ci",
        ["admin", "member"],
        None,
    )
    table = await cli.run_local("keys", "list", "--tenant", "acme")
    assert key_id in table.stdout and secret not in table.stdout and secret not in listed.stdout

    revoked = await cli.run_local("keys", "revoke", key_id, "--tenant", "acme")
    assert revoked.exit_code == 0, revoked.output
    assert f"revoked {key_id} (ci)" in revoked.stdout
    after = json.loads((await cli.run_local("keys", "list", "--tenant", "acme", "--json")).stdout)
    assert after[0]["timeRevoked"] is not None


async def test_a_created_key_authenticates_until_revoked(cli: Cli) -> None:
    key_id, token = await _create(cli)
    async with _authenticated_app(cli, token) as client:
        session = await client.create_session(title="with a key")
        assert (await client.get_session(session.id)).title == "with a key"
        revoked = await cli.run_local("keys", "revoke", key_id, "--tenant", "acme")
        assert revoked.exit_code == 0, revoked.output
        try:
            await client.list_sessions()
        except AgentForgeError as exc:
            assert (exc.status, exc.message) == (401, "invalid or revoked API key")
        else:
            raise AssertionError("a revoked key still worked")


async def test_other_tenants_see_no_keys_and_cannot_revoke_them(cli: Cli) -> None:
    key_id, _ = await _create(cli)
    other = await cli.run_local("keys", "list", "--tenant", "globex")
    assert other.exit_code == 0 and "no API keys in tenant globex" in other.stdout
    refused = await cli.run_local("keys", "revoke", key_id, "--tenant", "globex")
    assert refused.exit_code == 1
    assert f"tenant globex has no API key {key_id}" in refused.stderr


async def test_bad_tenant_and_role_are_usage_errors(cli: Cli) -> None:
    tenant = await cli.run_local("keys", "create", "--tenant", "Not.Valid", "--name", "x")
    assert tenant.exit_code == 2 and "invalid tenant id" in tenant.output
    role = await cli.run_local("keys", "create", "--tenant", "acme", "--name", "x", "--role", "owner")
    assert role.exit_code == 2 and "unknown role(s) owner" in role.output
    assert json.loads((await cli.run_local("keys", "list", "--tenant", "acme", "--json")).stdout) == []
