"""Where the routes read a workspace's repository (`git_view`): here for the local user and a tenant
the operator runs unsandboxed, not at all for a confined tenant without a sandbox (the sandboxed
reads: test_git_confined.py)."""

from __future__ import annotations

from pathlib import Path

from agentforge.tools.sandbox import UNSANDBOXED, refused
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.git_reader import InThisProcess, git_view
from tests.workspace.test_git_confined import committed


async def test_where_a_repository_is_read(tmp_path: Path) -> None:
    root = committed(tmp_path / "repo", {"a.txt": "a\n"})
    local = await git_view(WorkspaceAccess(root, repo_above=True))
    assert isinstance(local, InThisProcess) and await local.has_repo()
    # The operator ran the tenant's commands without a sandbox: its repository is read here too.
    off = await git_view(WorkspaceAccess(root, sandbox=UNSANDBOXED))
    assert isinstance(off, InThisProcess) and await off.has_repo()
    # A confined tenant with no sandbox, or one refused, gets no repository read at all.
    for access in (WorkspaceAccess(root), WorkspaceAccess(root, sandbox=refused("no bwrap"))):
        view = await git_view(access)
        assert not await view.has_repo() and (await view.info()).branch is None and await view.status() == []
