from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from agentforge.testing.tools import refuse_outside, tool_context, unconfined
from agentforge.tools.base import OutsideWorkspaceError, PermissionDeniedError, ToolError
from agentforge.tools.confinement import Confinement, ProcessEnv, WorkspaceBoundary
from agentforge.tools.fence import Fence, FencedPathError
from agentforge.tools.paths import display_path, guard_path
from agentforge.tools.sandbox import UNSANDBOXED
from agentforge.tools.truncation import output_dir
from tests.tools.harness import Harness


async def test_relative_path_resolves_against_workspace(harness: Harness) -> None:
    path = await guard_path(harness.context(), "src/app.py")
    assert path == harness.workspace / "src" / "app.py"
    assert harness.asks == []


async def test_absolute_path_inside_workspace_is_allowed(harness: Harness) -> None:
    inside = harness.workspace / "a" / ".." / "b.txt"
    path = await guard_path(harness.context(), str(inside))
    assert path == harness.workspace / "b.txt"
    assert harness.asks == []


async def test_dotdot_escape_asks_then_refuses(harness: Harness) -> None:
    with pytest.raises(ToolError) as caught:
        await guard_path(harness.context(), "../secret.txt")
    root = harness.workspace.resolve()
    assert f"is outside the workspace {root}" in str(caught.value)
    [request] = harness.asks
    parent = harness.workspace.parent.resolve()
    assert request.permission == "external_directory"
    assert request.patterns == [f"{parent}/*"]
    assert request.always == [f"{parent}/*"]
    assert request.metadata == {"filepath": str(parent / "secret.txt"), "parentDir": str(parent)}


async def test_absolute_path_elsewhere_is_refused(harness: Harness, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(ToolError, match="outside the workspace"):
        await guard_path(harness.context(), str(elsewhere))
    # A directory names itself in the permission pattern, not its parent.
    assert harness.asks[0].patterns == [f"{elsewhere.resolve()}/*"]


async def test_symlink_inside_workspace_pointing_outside_is_refused(harness: Harness, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text("secret")
    (harness.workspace / "link").symlink_to(outside)

    with pytest.raises(ToolError) as caught:
        await guard_path(harness.context(), "link/data.txt")
    assert f"resolves to {outside.resolve() / 'data.txt'}" in str(caught.value)
    assert harness.asked("external_directory")[0].metadata["parentDir"] == str(outside.resolve())


async def test_symlink_staying_inside_workspace_is_fine(harness: Harness) -> None:
    (harness.workspace / "real").mkdir()
    (harness.workspace / "alias").symlink_to(harness.workspace / "real")
    path = await guard_path(harness.context(), "alias/x.txt")
    assert path == harness.workspace / "alias" / "x.txt"


async def test_an_approved_ask_lets_outside_paths_through(harness: Harness, tmp_path: Path) -> None:
    harness.approve_external = True
    path = await guard_path(harness.context(), str(tmp_path / "other.txt"))
    assert path == tmp_path / "other.txt"
    assert len(harness.asked("external_directory")) == 1


async def test_an_ask_refusing_outside_paths_gets_a_message_naming_the_workspace(tmp_path: Path) -> None:
    ctx = tool_context(tmp_path, tmp_path, confinement=unconfined(), ask=refuse_outside)
    with pytest.raises(PermissionDeniedError, match="outside the workspace") as caught:
        await guard_path(ctx, "/etc/hostname")
    assert caught.value.blocks_loop
    assert str(caught.value) == f"Refusing to access /etc/hostname: it is outside the workspace {tmp_path}."
    assert await guard_path(ctx, "inside.txt") == tmp_path / "inside.txt"


async def test_the_fence_refuses_before_anyone_is_asked(harness: Harness, tmp_path: Path) -> None:
    other = tmp_path / "other-tenant"
    other.mkdir()
    harness.confinement = replace(unconfined(), fence=Fence(closed=(other.resolve(),)))
    harness.approve_external = True  # whatever a person would answer
    with pytest.raises(FencedPathError, match="belongs to the server or to another tenant") as caught:
        await guard_path(harness.context(), str(other / "plans.txt"))
    assert caught.value.refused_by == "fence"
    assert harness.asks == []
    # Outside the fence, the ask decides as before.
    assert await guard_path(harness.context(), str(tmp_path / "notes.txt")) == tmp_path / "notes.txt"
    assert len(harness.asked("external_directory")) == 1


async def test_a_refusing_ask_stops_before_the_workspace_check(harness: Harness) -> None:
    class Denied(ToolError):
        pass

    async def deny(_request: object) -> None:
        raise Denied("no")

    ctx = replace(harness.context(), ask=deny)
    with pytest.raises(Denied):
        await guard_path(ctx, "/etc/hostname")


async def test_truncation_directory_is_always_allowed(harness: Harness) -> None:
    saved = output_dir(harness.data_dir) / "tool_abc"
    saved.parent.mkdir(parents=True)
    saved.write_text("x")
    assert await guard_path(harness.context(), str(saved)) == saved
    assert harness.asks == []


async def test_workspace_given_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    linked = tmp_path / "ws-link"
    linked.symlink_to(real)
    harness = Harness(workspace=linked, data_dir=tmp_path / "data")
    assert await guard_path(harness.context(), "f.txt") == linked / "f.txt"
    assert await guard_path(harness.context(), str(real / "g.txt")) == real / "g.txt"
    assert harness.asks == []


def home() -> str:
    return os.path.expanduser("~")


async def test_home_relative_paths_are_expanded(harness: Harness) -> None:
    with pytest.raises(ToolError, match=re.escape(home())):
        await guard_path(harness.context(), "~/notes.txt")


def test_display_path(harness: Harness, tmp_path: Path) -> None:
    ctx = harness.context()
    assert display_path(ctx, harness.workspace / "a" / "b.py") == "a/b.py"
    assert display_path(ctx, harness.workspace) == "."
    assert display_path(ctx, tmp_path / "x") == str(tmp_path / "x")


# --- a tenant's hard boundary ------------------------------------------------------------------


def confine(harness: Harness, *also: Path) -> WorkspaceBoundary:
    """Give the harness a tenant's boundary: its workspace, plus `also`; asks approve everything,
    so only the boundary can refuse."""
    boundary = WorkspaceBoundary(workspace=harness.workspace.resolve(), also=tuple(p.resolve() for p in also))
    harness.confinement = Confinement(
        env=ProcessEnv(), boundary=boundary, fence=Fence(), sandbox=UNSANDBOXED, shell_denied=None
    )
    harness.approve_external = True
    return boundary


async def test_a_confined_tenant_is_refused_outside_paths_without_an_ask(harness: Harness) -> None:
    confine(harness)
    with pytest.raises(OutsideWorkspaceError) as caught:
        await guard_path(harness.context(), "/etc/hostname")
    assert str(caught.value) == (
        f"Refusing to access /etc/hostname: it is outside this tenant's workspace "
        f"{harness.workspace.resolve()}. Work with files inside the workspace."
    )
    assert caught.value.blocks_loop
    assert harness.asks == []


async def test_a_symlink_into_another_tenants_workspace_is_refused(harness: Harness, tmp_path: Path) -> None:
    other = tmp_path / "tenant-a"
    other.mkdir()
    (other / "secret.txt").write_text("a's secret")
    (harness.workspace / "peek").symlink_to(other)
    confine(harness)
    with pytest.raises(OutsideWorkspaceError, match="outside this tenant's workspace") as caught:
        await guard_path(harness.context(), "peek/secret.txt")
    assert f"resolves to {other.resolve() / 'secret.txt'}" in str(caught.value)
    assert harness.asks == []


async def test_a_granted_directory_still_goes_through_the_ask(harness: Harness, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    confine(harness, shared)
    assert await guard_path(harness.context(), str(shared / "x.txt")) == shared / "x.txt"
    [request] = harness.asked("external_directory")
    assert request.patterns == [f"{shared.resolve()}/*"]


async def test_inside_the_boundary_paths_resolve_as_usual(harness: Harness) -> None:
    confine(harness)
    (harness.workspace / "real").mkdir()
    (harness.workspace / "alias").symlink_to(harness.workspace / "real")
    assert await guard_path(harness.context(), "alias/x.txt") == harness.workspace / "alias" / "x.txt"
    assert harness.asks == []


async def test_the_boundary_outranks_the_truncation_directory_of_another_data_dir(
    harness: Harness, tmp_path: Path
) -> None:
    """The truncation exemption is the context's own spill directory: inside the boundary it is
    allowed without an ask; a data dir outside the boundary grants nothing."""
    saved = output_dir(harness.data_dir) / "tool_abc"
    saved.parent.mkdir(parents=True)
    saved.write_text("x")
    confine(harness, output_dir(harness.data_dir))
    assert await guard_path(harness.context(), str(saved)) == saved
    assert harness.asks == []
    confine(harness)
    with pytest.raises(OutsideWorkspaceError):
        await guard_path(harness.context(), str(saved))


async def test_a_tenants_home_is_its_workspace_as_in_its_shell(harness: Harness) -> None:
    boundary = WorkspaceBoundary(workspace=harness.workspace.resolve())
    env = ProcessEnv(inherit=False, home=harness.workspace, tmpdir=harness.data_dir / "tmp")
    harness.confinement = Confinement(
        env=env, boundary=boundary, fence=Fence(), sandbox=UNSANDBOXED, shell_denied=None
    )
    assert await guard_path(harness.context(), "~/notes.txt") == harness.workspace / "notes.txt"
    assert await guard_path(harness.context(), "~") == harness.workspace
    assert harness.asks == []
