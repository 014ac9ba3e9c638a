from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentforge.tools.base import OutsideWorkspaceError, Tool
from agentforge.tools.builtin.apply_patch import ApplyPatchTool
from agentforge.tools.builtin.edit import EditTool
from agentforge.tools.builtin.glob import GlobTool
from agentforge.tools.builtin.grep import GrepTool
from agentforge.tools.builtin.list import ListTool
from agentforge.tools.builtin.read import ReadTool
from agentforge.tools.builtin.write import WriteTool
from agentforge.tools.confinement import Confinement, ProcessEnv, WorkspaceBoundary
from agentforge.tools.fence import Fence
from agentforge.tools.sandbox import UNSANDBOXED
from agentforge.tools.services import ToolServices
from tests.tools.harness import Harness

SERVER_ENV = {
    "PATH": "/opt/bin:/usr/bin",
    "LANG": "C.UTF-8",
    "TZ": "Europe/Oslo",
    "HOME": "/home/server",
    "OPENAI_API_KEY": "sk-server-secret",
    "AGENTFORGE_DATABASE_URL": "postgresql://forge:pw@db/forge",
}


def clean(tmp_path: Path, **declared: str) -> ProcessEnv:
    return ProcessEnv(inherit=False, home=tmp_path / "ws", tmpdir=tmp_path / "tmp", declared=declared)


def test_a_clean_environment_keeps_only_the_safe_base_with_the_tenants_home_and_tmpdir(
    tmp_path: Path,
) -> None:
    env = clean(tmp_path).build(server_env=SERVER_ENV)
    assert env == {
        "PATH": "/opt/bin:/usr/bin",
        "LANG": "C.UTF-8",
        "TZ": "Europe/Oslo",
        "HOME": str(tmp_path / "ws"),
        "TMPDIR": str(tmp_path / "tmp"),
        "TERM": "dumb",
    }


def test_a_clean_environment_has_a_path_even_when_the_server_has_none(tmp_path: Path) -> None:
    env = clean(tmp_path).build(server_env={"SECRET": "x"})
    assert env["PATH"] == os.defpath
    assert "SECRET" not in env


def test_declared_variables_then_additions_are_laid_over_the_base(tmp_path: Path) -> None:
    env = clean(tmp_path, REGION="eu-1", MODE="declared").build(
        {"MODE": "plugin", "PLUGIN": "yes"}, server_env=SERVER_ENV
    )
    assert (env["REGION"], env["MODE"], env["PLUGIN"]) == ("eu-1", "plugin", "yes")
    assert "OPENAI_API_KEY" not in env


def test_an_inheriting_environment_is_the_servers_with_the_declared_variables(tmp_path: Path) -> None:
    env = ProcessEnv(inherit=True, declared={"REGION": "eu-1"}).build(server_env=SERVER_ENV)
    assert env == {**SERVER_ENV, "REGION": "eu-1", "TERM": "dumb"}


def test_clean_drops_inheritance_and_keeps_the_rest(tmp_path: Path) -> None:
    inheriting = ProcessEnv(inherit=True, declared={"REGION": "eu-1"})
    env = inheriting.clean().build(server_env=SERVER_ENV)
    assert "OPENAI_API_KEY" not in env
    assert env["REGION"] == "eu-1"
    assert "HOME" not in env  # no tenant home given: the MCP SDK adds the user's own


def test_the_boundary_holds_its_workspace_and_granted_directories(tmp_path: Path) -> None:
    boundary = WorkspaceBoundary(workspace=tmp_path / "ws", also=(tmp_path / "shared",))
    assert boundary.contains(tmp_path / "ws")
    assert boundary.contains(tmp_path / "ws" / "a" / "b.txt")
    assert boundary.contains(tmp_path / "shared" / "x")
    assert not boundary.contains(tmp_path / "ws-other" / "x")  # a prefix of the name is not inside
    assert not boundary.contains(tmp_path)


def test_the_refusal_says_where_a_path_leads_and_what_to_do(tmp_path: Path) -> None:
    boundary = WorkspaceBoundary(workspace=tmp_path / "ws")
    link, real = tmp_path / "ws" / "link", tmp_path / "other" / "secret"
    message = boundary.refusal(link, real)
    assert message == (
        f"Refusing to access {link} (it resolves to {real}): it is outside this tenant's workspace "
        f"{tmp_path / 'ws'}. Work with files inside the workspace."
    )
    assert "resolves" not in boundary.refusal(real, real)


async def test_tool_processes_get_the_confined_env_and_plugin_additions(
    harness: Harness, tmp_path: Path
) -> None:
    seen: list[tuple[Path, str, str | None]] = []

    async def plugin_env(cwd: Path, *, session_id: str, call_id: str | None) -> dict[str, str]:
        seen.append((cwd, session_id, call_id))
        return {"FROM_PLUGIN": "1"}

    harness.services = ToolServices(shell_env=plugin_env)
    harness.confinement = Confinement(
        env=clean(tmp_path, DECLARED="2"),
        boundary=None,
        fence=Fence(),
        sandbox=UNSANDBOXED,
        shell_denied=None,
    )
    ctx = harness.context()
    env = await ctx.process_env(harness.workspace)
    assert (env["FROM_PLUGIN"], env["DECLARED"], env["HOME"]) == ("1", "2", str(tmp_path / "ws"))
    assert seen == [(harness.workspace, ctx.session_id, ctx.call_id)]


def outside_call(name: str, target: Path) -> tuple[Tool[Any], dict[str, Any]]:
    """The tool `name` pointed at `target`, a directory outside the workspace holding f.txt."""
    patch = f"*** Begin Patch\n*** Add File: {target}/p.txt\n+x\n*** End Patch"
    calls: dict[str, tuple[Tool[Any], dict[str, Any]]] = {
        "read": (ReadTool(), {"filePath": str(target / "f.txt")}),
        "write": (WriteTool(), {"filePath": str(target / "new.txt"), "content": "x"}),
        "edit": (EditTool(), {"filePath": str(target / "f.txt"), "oldString": "a", "newString": "b"}),
        "apply_patch": (ApplyPatchTool(), {"patchText": patch}),
        "glob": (GlobTool(), {"pattern": "*", "path": str(target)}),
        "grep": (GrepTool(ripgrep=None), {"pattern": "a", "path": str(target)}),
        "list": (ListTool(), {"path": str(target)}),
    }
    return calls[name]


@pytest.mark.parametrize("name", ["read", "write", "edit", "apply_patch", "glob", "grep", "list"])
async def test_every_file_tool_of_a_confined_tenant_stops_at_the_boundary(
    harness: Harness, tmp_path: Path, name: str
) -> None:
    outside = tmp_path / "other-tenant"
    outside.mkdir()
    (outside / "f.txt").write_text("a")
    harness.confine()
    harness.approve_external = True  # whatever a person would answer
    tool, arguments = outside_call(name, outside)
    with pytest.raises(OutsideWorkspaceError, match="outside this tenant's workspace"):
        await harness.run(tool, **arguments)
    assert harness.asks == []
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "a"


def test_excluded_directories_inside_the_workspace_are_out_except_the_tenants_own() -> None:
    boundary = WorkspaceBoundary(
        workspace=Path("/srv/forge"),
        also=(Path("/srv/forge/data/tool-output"),),
        excluded=(Path("/srv/forge/data"), Path("/srv/forge/tenants")),
    )
    assert boundary.contains(Path("/srv/forge/project/main.py"))
    assert not boundary.contains(Path("/srv/forge/tenants/acme/plans.txt"))
    assert not boundary.contains(Path("/srv/forge/data/forge.db"))
    assert boundary.contains(Path("/srv/forge/data/tool-output/spill.txt"))
    assert not boundary.contains(Path("/srv/other"))
