"""Each tenant's sandbox, from the server's config: what it sees, whether it may use the network, and
what happens where the kernel gives no sandbox (a bwrap that cannot run stands in for such a kernel)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agentforge.config import ConfigError, Settings
from agentforge.runtime.scope import TMP_DIR, open_scope
from agentforge.tools.confinement import ShellNotAllowedError
from agentforge.tools.truncation import output_dir
from tests.runtime.test_scope import BuiltinTools, settings, write_overlay
from tests.sandboxing import requires_sandbox


def no_bwrap(tmp_path: Path) -> dict[str, Any]:
    """A sandbox section whose bwrap cannot create namespaces, as on a kernel without them."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    return {"bwrap": str(fake)}


def confined(tmp_path: Path, **config: Any) -> Settings:
    """Authentication on (every tenant confined), acme granted commands unless `tenancy` says otherwise."""
    return settings(tmp_path, **{"auth": {"required": True}, "tenancy": {"shell": ["acme"]}, **config})


@requires_sandbox
async def test_the_local_user_sees_the_host_read_only_but_not_the_servers_data(tmp_path: Path) -> None:
    server = settings(tmp_path, sandbox={"writable": [str(tmp_path / "cache")]})
    (tmp_path / "cache").mkdir()
    sandbox = (await open_scope(server, "default", BuiltinTools())).confinement.sandbox
    assert sandbox.kind == "bwrap" and sandbox.view is not None
    assert sandbox.view.host
    assert sandbox.view.writable == ((tmp_path / "workspace").resolve(), (tmp_path / "cache").resolve())
    assert (tmp_path / "data").resolve() in sandbox.view.hidden
    assert output_dir(tmp_path / "data").resolve() in sandbox.view.readable  # the truncation hint's files
    assert not sandbox.network  # nobody's commands get the network unless granted
    assert not sandbox.sandbox_mcp  # the local user's own MCP servers are its own business


@requires_sandbox
async def test_a_confined_tenant_sees_system_directories_its_own_and_what_it_is_granted(
    tmp_path: Path,
) -> None:
    granted = tmp_path / "shared"
    granted.mkdir()
    server = confined(
        tmp_path,
        sandbox={"readable": [str(tmp_path / "tools")], "network": ["acme"]},
        tenancy={"shell": ["acme"], "external_directories": {"acme": [str(granted)]}},
    )
    scope = await open_scope(server, "acme", BuiltinTools())
    sandbox = scope.confinement.sandbox
    assert sandbox.kind == "bwrap" and sandbox.view is not None
    assert not sandbox.view.host
    data = (tmp_path / "data" / "tenants" / "acme").resolve()
    assert sandbox.view.writable == (scope.settings.directory.resolve(), data / TMP_DIR, data / "plans")
    assert set(sandbox.view.readable) == {
        data / "tool-output",
        granted.resolve(),
        (tmp_path / "tools").resolve(),
    }
    assert (tmp_path / "data").resolve() in sandbox.view.hidden
    assert Path("/etc/shadow") in sandbox.view.masked
    assert sandbox.network  # granted
    assert not (await open_scope(server, "default", BuiltinTools())).confinement.sandbox.network


async def test_without_a_sandbox_auto_runs_the_local_users_commands_and_refuses_tenants(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        local = await open_scope(settings(tmp_path, sandbox=no_bwrap(tmp_path)), "default", BuiltinTools())
    assert local.confinement.sandbox.kind == "unsandboxed"
    local.confinement.check_shell()  # runs, unsandboxed
    assert "Commands run WITHOUT a sandbox" in caplog.text
    assert "Permission denied" in caplog.text

    server = confined(tmp_path, sandbox=no_bwrap(tmp_path))
    acme = (await open_scope(server, "acme", BuiltinTools())).confinement
    assert acme.sandbox.kind == "refused"
    assert acme.shell_denied == "acme"  # so the bash tool is not even offered
    with pytest.raises(ShellNotAllowedError, match="run only inside the OS sandbox") as refused:
        acme.check_shell()
    assert "Permission denied" in str(refused.value)
    # A tenant without the grant is still told about the grant, not the sandbox.
    beta = (await open_scope(server, "beta", BuiltinTools())).confinement
    with pytest.raises(ShellNotAllowedError, match=r"tenancy\.shell"):
        beta.check_shell()


async def test_required_refuses_everyones_commands_and_off_runs_them_unsandboxed(tmp_path: Path) -> None:
    required = settings(tmp_path, sandbox={**no_bwrap(tmp_path), "mode": "required"})
    local = (await open_scope(required, "default", BuiltinTools())).confinement
    with pytest.raises(ShellNotAllowedError, match=r"sandbox\.mode is required"):
        local.check_shell()

    off = confined(tmp_path, sandbox={**no_bwrap(tmp_path), "mode": "off"})
    acme = (await open_scope(off, "acme", BuiltinTools())).confinement
    assert acme.sandbox.kind == "unsandboxed"
    acme.check_shell()


async def test_the_sandbox_is_the_servers_to_configure(tmp_path: Path) -> None:
    server = settings(tmp_path)
    path = write_overlay(server, "acme", {"sandbox": {"network": "*"}})
    with pytest.raises(ConfigError, match="sandbox cannot be set per tenant") as caught:
        await open_scope(server, "acme", BuiltinTools())
    assert str(path) in str(caught.value)
    with pytest.raises(ConfigError, match=r"sandbox\.mode"):
        settings(tmp_path, sandbox={"mode": "sometimes"})
    with pytest.raises(ConfigError, match="must be absolute paths"):
        settings(tmp_path, sandbox={"writable": ["relative/dir"]})
    with pytest.raises(ConfigError, match=r"sandbox\.network"):
        settings(tmp_path, sandbox={"network": ["Not A Tenant"]})
