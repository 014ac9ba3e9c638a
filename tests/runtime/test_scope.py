"""Tenant scopes: where each tenant works, which config it gets, and how scopes are built and cached."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from agentforge.config import ConfigError, Settings, load_settings
from agentforge.identity.model import InvalidTenantId
from agentforge.runtime.runtime import Runtime
from agentforge.runtime.scope import (
    TMP_DIR,
    TenantScopeError,
    open_scope,
    overlay_path,
    tenant_fence,
    tenant_roots,
)
from agentforge.tools.registry import ToolRegistry
from agentforge.tools.truncation import output_dir


class BuiltinTools:
    """The tool source a runtime gets from its plugin manager, reduced to the built-ins."""

    def tools(self) -> list[Any]:
        return ToolRegistry.builtin().all()


def settings(tmp_path: Path, **config: Any) -> Settings:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return load_settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'forge.db'}",
        directory=workspace,
        config_override={"model": "fake/m", "provider": {"fake": {"options": {"baseURL": "http://x"}}}}
        | config,
    )


def write_overlay(server: Settings, tenant_id: str, overlay: dict[str, Any] | str) -> Path:
    path = overlay_path(server, tenant_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(overlay if isinstance(overlay, str) else json.dumps(overlay))
    return path


# --- roots ---------------------------------------------------------------------------------------


def test_the_default_tenant_keeps_the_servers_directory_and_data(tmp_path: Path) -> None:
    server = settings(tmp_path)
    roots = tenant_roots(server, "default")
    assert roots.workspace == server.directory
    assert roots.data_dir == server.data_dir


def test_other_tenants_work_under_the_data_directory_unless_a_workspace_root_is_set(tmp_path: Path) -> None:
    server = settings(tmp_path)
    roots = tenant_roots(server, "acme")
    assert roots.workspace == tmp_path / "data" / "tenants" / "acme" / "workspace"
    assert roots.data_dir == tmp_path / "data" / "tenants" / "acme"


def test_the_workspace_root_places_the_tenant_where_the_placeholder_says(tmp_path: Path) -> None:
    placed = settings(tmp_path, tenancy={"workspace_root": str(tmp_path / "t" / "{tenant}" / "ws")})
    assert tenant_roots(placed, "acme").workspace == tmp_path / "t" / "acme" / "ws"
    # Without the placeholder every tenant still gets its own directory under the root.
    shared = settings(tmp_path, tenancy={"workspace_root": str(tmp_path / "t")})
    assert tenant_roots(shared, "acme").workspace == tmp_path / "t" / "acme"
    assert tenant_roots(shared, "beta").workspace == tmp_path / "t" / "beta"


def test_a_tenant_id_that_could_escape_its_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidTenantId):
        tenant_roots(settings(tmp_path), "../default")


async def test_a_tenants_roots_are_created_private_on_first_use(tmp_path: Path) -> None:
    server = settings(tmp_path)
    scope = await open_scope(server, "acme", BuiltinTools())
    for path in (scope.settings.directory, scope.settings.data_dir):
        assert path.is_dir()
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert scope.settings.directory == tmp_path / "data" / "tenants" / "acme" / "workspace"


async def test_a_tenant_root_inside_the_default_workspace_is_refused(tmp_path: Path) -> None:
    server = settings(tmp_path, tenancy={"workspace_root": str(tmp_path / "workspace" / "tenants")})
    with pytest.raises(ConfigError, match="overlaps the default tenant's workspace"):
        await open_scope(server, "acme", BuiltinTools())
    assert not (tmp_path / "workspace" / "tenants").exists()


async def test_a_root_that_cannot_be_created_is_a_config_error(tmp_path: Path) -> None:
    server = settings(tmp_path, tenancy={"workspace_root": str(tmp_path / "roots")})
    (tmp_path / "roots").write_text("a file where the tenants' directories should go")
    with pytest.raises(ConfigError, match=r"cannot create .*roots/acme"):
        await open_scope(server, "acme", BuiltinTools())


# --- config overlays ------------------------------------------------------------------------------


async def test_overlays_apply_to_their_tenant_only_the_file_last(tmp_path: Path) -> None:
    server = settings(
        tmp_path,
        small_model="fake/base-small",
        tool_output={"max_lines": 100},
        tenancy={"overlays": {"acme": {"small_model": "fake/acme-small", "retry": {"max_attempts": 9}}}},
    )
    write_overlay(server, "acme", {"retry": {"max_attempts": 3}, "agent": {"build": {"prompt": "acme"}}})
    acme = await open_scope(server, "acme", BuiltinTools())
    beta = await open_scope(server, "beta", BuiltinTools())
    assert acme.settings.config.small_model == "fake/acme-small"
    assert acme.max_retries == 3  # the overlay file wins over the config's overlay
    assert acme.limits.max_lines == 100  # what no overlay sets comes from the server's config
    assert acme.agents.get("build").prompt == "acme"
    assert beta.settings.config.small_model == "fake/base-small"
    assert beta.agents.get("build").prompt is None
    # A tenant's config never carries the tenancy section (other tenants' overlays).
    assert acme.settings.config.tenancy.overlays == {}


async def test_a_tenants_truncation_directory_is_its_own(tmp_path: Path) -> None:
    server = settings(tmp_path)
    acme = await open_scope(server, "acme", BuiltinTools())
    default = await open_scope(server, "default", BuiltinTools())
    acme_rules = {(r.permission, r.pattern, r.action) for r in acme.agents.get("build").permission.rules}
    own = f"{output_dir(tmp_path / 'data' / 'tenants' / 'acme').as_posix()}/*"
    assert ("external_directory", own, "allow") in acme_rules
    default_rules = {(r.permission, r.pattern) for r in default.agents.get("build").permission.rules}
    assert ("external_directory", own) not in default_rules


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        ('{"model": ', "invalid JSON at line 1"),
        ("[1, 2]", "must be a JSON object"),
        ({"provider": {"x": {"options": {"apiKey": "{env:HOME}"}}}}, r"\{env:\.\.\.\} and \{file:\.\.\.\}"),
        ({"server": {"port": 1}}, "server cannot be set per tenant"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
    ],
)
async def test_a_bad_overlay_file_names_the_file_and_the_problem(
    tmp_path: Path, overlay: dict[str, Any] | str, message: str
) -> None:
    server = settings(tmp_path)
    path = write_overlay(server, "acme", overlay)
    with pytest.raises(ConfigError, match=message) as caught:
        await open_scope(server, "acme", BuiltinTools())
    assert str(path) in str(caught.value)


def settings_in(directory: Path, tmp_path: Path, **config: Any) -> Settings:
    """A server run from `directory` (e.g. `/` under systemd or Docker)."""
    return load_settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'forge.db'}",
        directory=directory,
        config_override={"model": "fake/m", "provider": {"fake": {"options": {"baseURL": "http://x"}}}}
        | config,
    )


@pytest.mark.parametrize("layout", ["root", "parent"])
async def test_a_server_run_from_a_parent_of_the_workspaces_serves_tenants_only_with_auth_on(
    tmp_path: Path, layout: str
) -> None:
    # `root`: cwd `/`, workspaces in the data directory; `parent`: cwd `/srv/forge`, workspaces in
    # `/srv/forge/tenants/{tenant}`.
    srv = tmp_path / "srv" / "forge"
    srv.mkdir(parents=True)
    directory = Path("/") if layout == "root" else srv
    tenancy = {} if layout == "root" else {"workspace_root": str(srv / "tenants" / "{tenant}")}
    local = settings_in(directory, tmp_path, tenancy=tenancy)
    with pytest.raises(ConfigError, match="overlaps the default tenant's workspace"):
        await open_scope(local, "acme", BuiltinTools())

    served = settings_in(directory, tmp_path, tenancy=tenancy, auth={"required": True})
    acme = await open_scope(served, "acme", BuiltinTools())
    in_data = tmp_path / "data" / "tenants" / "acme" / "workspace"
    expected = in_data if layout == "root" else srv / "tenants" / "acme"
    assert acme.settings.directory == expected
    # The default tenant is confined to the server directory and fenced from acme's roots.
    default = await open_scope(served, "default", BuiltinTools())
    assert default.confinement.boundary is not None
    assert default.confinement.boundary.workspace == directory.resolve()
    assert any(expected.resolve().is_relative_to(closed) for closed in default.confinement.fence.closed)
    assert directory.resolve() not in acme.confinement.fence.open
    # acme's files and the server's data lie inside the default workspace: the boundary keeps them
    # out (the fence only sees paths outside a workspace), but not the default tenant's own dirs.
    boundary = default.confinement.boundary
    assert not boundary.contains(expected.resolve() / "plans.txt")
    assert not boundary.contains((tmp_path / "data" / "tenants" / "acme").resolve())
    assert not boundary.contains((tmp_path / "data" / "forge.db").resolve())
    assert boundary.contains(output_dir(tmp_path / "data").resolve() / "spill.txt")
    assert boundary.contains(directory.resolve() / "project" / "main.py")


# --- confinement -------------------------------------------------------------------------------


async def test_a_tenant_gets_a_clean_environment_and_a_hard_boundary(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    server = settings(
        tmp_path,
        shell_env={"BASE": "server"},
        tenancy={
            "overlays": {"acme": {"shell_env": {"REGION": "eu-1"}}},
            "external_directories": {"acme": [str(shared)]},
        },
    )
    write_overlay(server, "acme", {"shell_env": {"TEAM": "blue"}})
    acme = await open_scope(server, "acme", BuiltinTools())
    data = tmp_path / "data" / "tenants" / "acme"
    env = acme.confinement.env
    assert (env.inherit, env.home, env.tmpdir) == (False, acme.settings.directory, data / TMP_DIR)
    assert env.declared == {"BASE": "server", "REGION": "eu-1", "TEAM": "blue"}
    assert stat.S_IMODE((data / TMP_DIR).stat().st_mode) == 0o700
    boundary = acme.confinement.boundary
    assert boundary is not None
    assert boundary.workspace == acme.settings.directory.resolve()
    assert set(boundary.also) == {
        output_dir(data).resolve(),
        (data / "plans").resolve(),
        (data / TMP_DIR).resolve(),
        shared.resolve(),
    }
    assert not boundary.contains(tmp_path / "workspace")  # the default tenant's
    assert not boundary.contains(data / "agentforge.json")  # its own overlay file


async def test_the_default_tenant_inherits_the_environment_unless_configured_otherwise(
    tmp_path: Path,
) -> None:
    local = await open_scope(settings(tmp_path, shell_env={"X": "1"}), "default", BuiltinTools())
    assert local.confinement.env.inherit
    assert local.confinement.env.declared == {"X": "1"}
    assert local.confinement.boundary is None
    clean = await open_scope(settings(tmp_path, tools={"inherit_env": False}), "default", BuiltinTools())
    env = clean.confinement.env
    assert (env.inherit, env.home, env.tmpdir) == (False, tmp_path / "workspace", tmp_path / "data" / TMP_DIR)
    assert clean.confinement.boundary is None  # local mode keeps the usual external_directory asks


async def test_the_default_tenant_is_confined_when_authentication_is_on(tmp_path: Path) -> None:
    server = settings(tmp_path, auth={"required": True}, shell_env={"X": "1"})
    default = await open_scope(server, "default", BuiltinTools())
    env = default.confinement.env
    assert (env.inherit, env.home, env.tmpdir) == (False, tmp_path / "workspace", tmp_path / "data" / TMP_DIR)
    assert env.declared == {"X": "1"}
    boundary = default.confinement.boundary
    assert boundary is not None
    assert boundary.workspace == (tmp_path / "workspace").resolve()
    assert not boundary.contains(tmp_path / "elsewhere")
    assert default.confinement.shell_denied == "default"


async def test_commands_are_off_for_confined_tenants_unless_the_server_grants_them(tmp_path: Path) -> None:
    local = settings(tmp_path)
    assert (await open_scope(local, "default", BuiltinTools())).confinement.shell_denied is None
    assert (await open_scope(local, "acme", BuiltinTools())).confinement.shell_denied == "acme"

    listed = settings(tmp_path, tenancy={"shell": ["acme"]}, auth={"required": True})
    assert (await open_scope(listed, "acme", BuiltinTools())).confinement.shell_denied is None
    assert (await open_scope(listed, "beta", BuiltinTools())).confinement.shell_denied == "beta"
    assert (await open_scope(listed, "default", BuiltinTools())).confinement.shell_denied == "default"

    everyone = settings(tmp_path, tenancy={"shell": "*"}, auth={"required": True})
    for tenant_id in ("acme", "beta", "default"):
        assert (await open_scope(everyone, tenant_id, BuiltinTools())).confinement.shell_denied is None


async def test_a_tenant_overlay_cannot_grant_itself_commands(tmp_path: Path) -> None:
    server = settings(tmp_path)
    path = write_overlay(server, "acme", {"tenancy": {"shell": ["acme"]}})
    with pytest.raises(ConfigError, match="tenancy cannot be set per tenant") as caught:
        await open_scope(server, "acme", BuiltinTools())
    assert str(path) in str(caught.value)
    with pytest.raises(ConfigError, match="tenancy cannot be set per tenant"):
        settings(tmp_path, tenancy={"overlays": {"acme": {"tenancy": {"shell": "*"}}}})


async def test_a_tenant_overlay_file_cannot_make_its_tools_inherit_the_environment(tmp_path: Path) -> None:
    server = settings(tmp_path)
    path = write_overlay(server, "acme", {"tools": {"inherit_env": True}})
    with pytest.raises(ConfigError, match=r"tools\.inherit_env cannot be set per tenant") as caught:
        await open_scope(server, "acme", BuiltinTools())
    assert str(path) in str(caught.value)


# --- the runtime's cache ----------------------------------------------------------------------------


async def test_concurrent_first_uses_build_one_scope_and_later_uses_reuse_it(tmp_path: Path) -> None:
    rt = await Runtime.open(settings(tmp_path))
    try:
        first, second = await asyncio.gather(rt.scope("acme"), rt.scope("acme"))
        assert first is second
        assert await rt.scope("acme") is first
        assert (await rt.scope("default")).settings.directory == tmp_path / "workspace"
    finally:
        await rt.close()


async def test_a_failed_build_is_reported_and_retried_once_the_overlay_is_fixed(tmp_path: Path) -> None:
    server = settings(tmp_path)
    rt = await Runtime.open(server)
    try:
        path = write_overlay(server, "acme", {"default_agent": "nobody"})
        with pytest.raises(TenantScopeError, match=r"tenant 'acme' cannot be served: .*nobody"):
            await rt.scope("acme")
        path.write_text(json.dumps({"default_agent": "plan"}))
        assert (await rt.scope("acme")).agents.default_name == "plan"
        with pytest.raises(TenantScopeError, match="invalid tenant id"):
            await rt.scope("_system")
    finally:
        await rt.close()


async def test_start_up_fails_on_a_configured_overlay_that_could_never_be_served(tmp_path: Path) -> None:
    server = settings(tmp_path, tenancy={"overlays": {"acme": {"default_agent": "nobody"}}})
    with pytest.raises(ConfigError, match='default_agent "nobody" is not an agent'):
        await Runtime.open(server)


async def test_a_scope_requested_after_close_is_refused(tmp_path: Path) -> None:
    rt = await Runtime.open(settings(tmp_path))
    await rt.close()
    with pytest.raises(TenantScopeError, match="shutting down"):
        await rt.scope("acme")


# --- fence ---------------------------------------------------------------------------------------


def test_a_tenant_is_fenced_from_the_server_data_and_the_default_workspace_but_not_its_own_roots(
    tmp_path: Path,
) -> None:
    server = settings(tmp_path)
    fence = tenant_fence(server, "acme")
    own = tenant_roots(server, "acme")
    database = tmp_path / "forge.db"
    assert fence.closed == (
        server.data_dir.resolve(),
        server.directory.resolve(),
        (server.data_dir / "tenants").resolve(),
        *(Path(f"{database.resolve()}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")),
    )
    assert fence.open == (own.workspace.resolve(), own.data_dir.resolve())


def test_the_default_tenant_is_fenced_from_the_other_tenants_workspaces_only(tmp_path: Path) -> None:
    server = settings(tmp_path, tenancy={"workspace_root": str(tmp_path / "spaces" / "{tenant}" / "code")})
    fence = tenant_fence(server, "default")
    assert fence.closed[:2] == ((server.data_dir / "tenants").resolve(), (tmp_path / "spaces").resolve())
    assert fence.closed[2:] == tenant_fence(server, "acme").closed[-4:]  # the database, wherever it is
    assert fence.open == ()
    acme = tenant_fence(server, "acme")
    assert (tmp_path / "spaces").resolve() in acme.closed
    assert (tmp_path / "spaces" / "acme" / "code").resolve() in acme.open


def test_a_workspace_root_naming_the_tenant_inside_a_component_fences_its_parent(tmp_path: Path) -> None:
    server = settings(tmp_path, tenancy={"workspace_root": str(tmp_path / "spaces" / "ws-{tenant}")})
    assert (tmp_path / "spaces").resolve() in tenant_fence(server, "default").closed
