"""A confined tenant's repository read inside its sandbox (`git_view`): it answers as a read in this
process does for a repository of the tenant's own, shows nothing of a repository its `.git` points
at outside what the tenant may see (which libgit2 in the server's process would read), and a read
that hangs or answers too much is given up."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentforge.tools.sandbox import Sandbox, View
from agentforge.workspace import git_confined
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.git import GitView
from agentforge.workspace.git_confined import ConfinedGit
from agentforge.workspace.git_reader import git_view
from tests.sandboxing import BWRAP, requires_sandbox
from tests.workspace.test_git import git

SECRET = "the other tenant's launch plan"


def confined(workspace: Path, *, hidden: tuple[Path, ...] = (), bwrap: Path = BWRAP) -> WorkspaceAccess:
    """A confined tenant's access to `workspace`, its sandbox seeing only the system and it."""
    view = View(host=False, writable=(workspace.resolve(),), hidden=hidden)
    return WorkspaceAccess(workspace, repo_above=False, sandbox=Sandbox(kind="bwrap", view=view, bwrap=bwrap))


def committed(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


@requires_sandbox
async def test_a_repository_of_its_own_reads_as_in_process(tmp_path: Path) -> None:
    files = {".gitignore": "build/\n", "keep.txt": "one\ntwo\n", "gone.txt": "x\n"}
    root = committed(tmp_path / "mine", files)
    (root / "keep.txt").write_text("one\nTWO\n")
    (root / "gone.txt").unlink()
    (root / "new.txt").write_text("a\n")
    (root / "build").mkdir()
    (root / "build" / "out.o").write_text("x\n")
    access = confined(root)
    view = await git_view(access)
    here = GitView.open_in_process(access)
    assert isinstance(view, ConfinedGit) and await view.has_repo()
    assert await view.info() == here.info() and here.info().branch == "main"
    assert await view.status() == here.status() and len(here.status()) == 3
    assert await view.diff("head") == here.diff("head") and await view.diff("branch") == here.diff("branch")
    assert await view.ignored(["build", "keep.txt"]) == here.ignored(["build", "keep.txt"]) == {"build"}
    diff = await view.diff_against_head("keep.txt", "one\nTWO\n")
    assert diff == here.diff_against_head("keep.txt", "one\nTWO\n") and "+TWO" in (diff or "")


def _commondir(workspace: Path, other: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "commondir").write_text(f"{other / '.git'}\n")
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


def _symlinked(workspace: Path, other: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for name in ("refs", "objects"):
        os.symlink(other / ".git" / name, workspace / ".git" / name)


def _gitfile(workspace: Path, other: Path) -> None:
    (workspace / ".git").write_text(f"gitdir: {other / '.git'}\n")


@requires_sandbox
@pytest.mark.parametrize(
    "point", [_commondir, _symlinked, _gitfile], ids=["commondir", "symlinks", "gitfile"]
)
async def test_a_git_pointing_out_of_the_workspace_shows_nothing(
    tmp_path: Path, point: Callable[[Path, Path], None]
) -> None:
    other = committed(tmp_path / "other", {"plan.txt": f"{SECRET}\n"})
    workspace = tmp_path / "tenant"
    workspace.mkdir()
    (workspace / "plan.txt").write_text("mine\n")
    point(workspace, other)
    access = confined(workspace, hidden=(other.resolve(),))
    view = await git_view(access)
    assert not await view.has_repo() and (await view.info()).branch is None
    assert await view.status() == [] and await view.diff("head") == []
    assert await view.diff_against_head("plan.txt", "mine\n") is None
    if point is not _gitfile:  # read by this process, the other tenant's history shows
        leaked = GitView.open_in_process(access).diff_against_head("plan.txt", "mine\n")
        assert leaked is not None and SECRET in leaked


def _script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "bwrap"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


async def test_a_failed_read_is_logged_and_shows_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = committed(tmp_path / "repo", {"a.txt": "a\n"})
    broken = _script(tmp_path, "echo 'bwrap: No permissions to create a new namespace' >&2\nexit 1")
    with caplog.at_level(logging.WARNING, logger="agentforge.workspace.git_confined"):
        view = await git_view(confined(root, bwrap=broken))
        assert not await view.has_repo() and await view.status() == []
    assert "No permissions to create a new namespace" in caplog.text


async def test_a_read_that_hangs_or_answers_too_much_is_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = committed(tmp_path / "repo", {"a.txt": "a\n"})
    monkeypatch.setattr(git_confined, "GIT_READ_TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr(git_confined, "MAX_ANSWER_BYTES", 1000)
    hanging = _script(tmp_path, "exec sleep 60")
    chatty = tmp_path / "chatty"
    chatty.mkdir()
    flooding = _script(chatty, "exec head -c 100000 /dev/zero")
    with caplog.at_level(logging.WARNING, logger="agentforge.workspace.git_confined"):
        assert not await (await git_view(confined(root, bwrap=hanging))).has_repo()
        assert await (await git_view(confined(root, bwrap=flooding))).status() == []
    assert "no answer within 0.5 s" in caplog.text and "an answer over 1000 bytes" in caplog.text
