"""Where a client's path leads, and what is refused: outside the workspace (written or through a
symlink), and the directories inside it that are not the tenant's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentforge.workspace.access import OutsideWorkspaceError, WorkspaceAccess, tenant_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return root


def test_paths_inside_resolve_relative_to_the_root_or_the_chosen_directory(workspace: Path) -> None:
    access = WorkspaceAccess(workspace)
    assert access.resolve("src/app.py") == workspace / "src" / "app.py"
    assert access.resolve(str(workspace / "src")) == workspace / "src"
    assert access.relative(workspace / "src" / "app.py") == "src/app.py"
    assert access.relative(workspace) == ""
    in_src = access.at(str(workspace / "src"))
    assert in_src.resolve("app.py") == workspace / "src" / "app.py"
    assert in_src.resolve("../src/app.py") == workspace / "src" / "app.py"


@pytest.mark.parametrize("raw", ["../outside.txt", "src/../../outside.txt", "/etc/passwd"])
def test_paths_outside_are_refused(workspace: Path, raw: str) -> None:
    with pytest.raises(OutsideWorkspaceError, match="outside the workspace"):
        WorkspaceAccess(workspace).resolve(raw)


def test_a_symlink_leading_out_is_refused_and_says_where_it_leads(workspace: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside.txt", workspace / "link.txt")
    os.symlink(tmp_path, workspace / "up")
    access = WorkspaceAccess(workspace)
    with pytest.raises(OutsideWorkspaceError, match=f"resolves to {tmp_path / 'outside.txt'}"):
        access.resolve("link.txt")
    with pytest.raises(OutsideWorkspaceError):
        access.resolve("up/outside.txt")


def test_a_symlink_staying_inside_is_followed(workspace: Path) -> None:
    os.symlink(workspace / "src", workspace / "alias")
    assert WorkspaceAccess(workspace).resolve("alias/app.py") == workspace / "alias" / "app.py"


def test_a_chosen_directory_must_be_inside_and_absolute(workspace: Path, tmp_path: Path) -> None:
    access = WorkspaceAccess(workspace)
    with pytest.raises(OutsideWorkspaceError, match="outside the workspace"):
        access.at(str(tmp_path))
    with pytest.raises(OutsideWorkspaceError, match="absolute"):
        access.at("src")
    with pytest.raises(OutsideWorkspaceError, match="not a directory"):
        access.at(str(workspace / "src" / "app.py"))
    assert access.at(None) is access


def test_directories_that_are_not_the_tenants_are_refused_and_left_out(
    workspace: Path, tmp_path: Path
) -> None:
    data = workspace / "data"  # the server's data directory, inside the workspace
    (data / "tenants" / "acme").mkdir(parents=True)
    own = data / "tenants" / "me"  # this tenant's own root, inside the closed one
    own.mkdir()
    access = tenant_workspace(
        workspace,
        not_its_own=[data.resolve(), tmp_path.resolve()],  # the parent does not count: it holds the root
        its_own=[own.resolve()],
    )
    assert access.excluded == (data.resolve(),)
    with pytest.raises(OutsideWorkspaceError, match="not this tenant's"):
        access.resolve("data/tenants/acme")
    assert access.excluded_inside(workspace) == ["data"]
    assert access.excluded_inside(workspace / "src") == []
