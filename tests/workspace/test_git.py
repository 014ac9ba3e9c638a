"""The workspace's git state read with libgit2: branch, status with line counts, ignored paths and the
diff against HEAD, limited to the workspace when the repository holds more than it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.git import GitView


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text("build/\n")
    (root / "keep.txt").write_text("one\ntwo\n")
    (root / "gone.txt").write_text("bye\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def test_branch_status_and_ignored_paths(repo: Path) -> None:
    (repo / "keep.txt").write_text("one\n2\nthree\n")
    (repo / "gone.txt").unlink()
    (repo / "new.txt").write_text("a\nb\nc\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("x\n")
    view = GitView.open_in_process(WorkspaceAccess(repo))
    info = view.info()
    assert (info.branch, info.default_branch) == ("main", "main")
    status = {item.path: (item.status, item.added, item.removed) for item in view.status()}
    assert status == {
        "keep.txt": ("modified", 2, 1),
        "gone.txt": ("deleted", 0, 1),
        "new.txt": ("added", 3, 0),
    }
    assert view.ignored(["build", "keep.txt", "build/out.o"]) == {"build", "build/out.o"}


def test_diff_against_head_only_for_a_changed_tracked_file(repo: Path) -> None:
    view = GitView.open_in_process(WorkspaceAccess(repo))
    assert view.diff_against_head("keep.txt", "one\ntwo\n") is None
    diff = view.diff_against_head("keep.txt", "one\nTWO\n")
    assert diff is not None and "-two\n+TWO\n" in diff
    assert view.diff_against_head("untracked.txt", "x\n") is None
    patches = view.diff("head")
    assert patches == []
    (repo / "keep.txt").write_text("one\nTWO\n")
    [changed] = view.diff("head")
    assert (changed.file, changed.status, changed.additions, changed.deletions) == (
        "keep.txt",
        "modified",
        1,
        1,
    )
    assert "+TWO" in changed.patch


def test_a_confined_workspace_only_counts_a_repository_of_its_own(repo: Path) -> None:
    inside = repo / "sub"
    inside.mkdir()
    (inside / "file.txt").write_text("x\n")
    (repo / "keep.txt").write_text("changed outside the workspace\n")
    confined = GitView.open_in_process(WorkspaceAccess(inside))
    assert confined.repo is None and confined.status() == [] and confined.info().branch is None
    # The local user's checkout around the workspace counts, but only the workspace's part of it.
    local = GitView.open_in_process(WorkspaceAccess(inside, repo_above=True))
    assert local.info().branch == "main"
    assert [item.path for item in local.status()] == ["file.txt"]


def test_before_the_first_commit_every_file_is_new(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q", "-b", "trunk")
    (root / "a.txt").write_text("1\n2\n")
    view = GitView.open_in_process(WorkspaceAccess(root))
    assert view.info().branch == "trunk"
    assert [(s.path, s.status, s.added) for s in view.status()] == [("a.txt", "added", 2)]
    assert view.diff("head") == []


def test_no_repository_no_state(tmp_path: Path) -> None:
    view = GitView.open_in_process(WorkspaceAccess(tmp_path))
    assert view.repo is None
    assert view.info().branch is None and view.status() == [] and view.ignored(["a"]) == set()


def test_a_file_name_that_is_no_utf8_is_shown_with_a_replacement_character(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "init")
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("x\n")
    view = GitView.open_in_process(WorkspaceAccess(root))
    [status], [diff] = view.status(), view.diff("head")
    assert status.path == diff.file == "caf\ufffd.txt"
    assert orjson.dumps([status.wire(), diff.wire()])  # was: surrogates not allowed (a 500)


def test_a_branch_name_that_is_no_utf8_is_shown_with_a_replacement_character(repo: Path) -> None:
    (repo / ".git" / "HEAD").write_bytes(b"ref: refs/heads/caf\xe9\n")
    info = GitView.open_in_process(WorkspaceAccess(repo)).info()
    assert info.branch == "caf\ufffd" and orjson.dumps(info.wire())
