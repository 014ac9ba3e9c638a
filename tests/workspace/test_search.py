"""Text search with ripgrep and fuzzy path search, inside the workspace and around what is excluded."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from agentforge.tools.sandbox import UNSANDBOXED, Sandbox, View, refused
from agentforge.workspace import search
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.search import SearchUnavailableError, find_text, fuzzy_filter, list_paths
from tests.sandboxing import BWRAP, requires_sandbox


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "src" / "server").mkdir(parents=True)
    (root / "src" / "server" / "routes.py").write_text("def handle():\n    return 'needle'\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("A needle in the docs.\n")
    (root / "private").mkdir()
    (root / "private" / "other.txt").write_text("needle of someone else\n")
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / "ignored.txt").write_text("needle\n")
    (root / ".git").mkdir()  # rg honours .gitignore inside a repository
    return root


async def test_find_text_reports_ripgrep_matches_relative_to_the_workspace(workspace: Path) -> None:
    access = WorkspaceAccess(workspace, excluded=((workspace / "private").resolve(),), sandbox=UNSANDBOXED)
    found = await find_text(access, "needle")
    paths = sorted(match["path"]["text"] for match in found)
    assert paths == ["docs/guide.md", "src/server/routes.py"]
    match = next(m for m in found if m["path"]["text"] == "src/server/routes.py")
    assert match["line_number"] == 2
    assert match["submatches"][0]["match"]["text"] == "needle"
    assert await find_text(access, "needle", limit=1) == found[:1]


async def test_find_text_starts_at_the_chosen_directory(workspace: Path) -> None:
    access = WorkspaceAccess(workspace, sandbox=UNSANDBOXED).at(str(workspace / "docs"))
    assert [m["path"]["text"] for m in await find_text(access, "needle")] == ["docs/guide.md"]


async def test_paths_list_files_then_their_directories_without_excluded_ones(workspace: Path) -> None:
    access = WorkspaceAccess(workspace, excluded=((workspace / "private").resolve(),), sandbox=UNSANDBOXED)
    paths = await list_paths(access)
    assert "src/server/routes.py" in paths and "src/server/" in paths and "docs/" in paths
    assert not any(p.startswith("private") for p in paths)
    assert "ignored.txt" not in paths


def test_fuzzy_filter_ranks_file_name_matches_first() -> None:
    paths = ["src/router/base.py", "src/server/routes.py", "docs/", "src/", "README.md", "src/server/"]
    assert fuzzy_filter(paths, "routes", kind=None, limit=3) == ["src/server/routes.py", "src/router/base.py"]
    assert fuzzy_filter(paths, "src", kind="directory", limit=5) == ["src/", "src/server/"]
    assert fuzzy_filter(paths, "", kind="file", limit=2) == ["src/router/base.py", "src/server/routes.py"]
    assert fuzzy_filter(paths, "zzz", kind=None, limit=5) == []


@requires_sandbox
async def test_a_confined_tenants_search_runs_in_its_sandbox(workspace: Path, tmp_path: Path) -> None:
    calls = tmp_path / "bwrap.calls"
    spy = tmp_path / "bwrap"
    spy.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {BWRAP} "$@"\n')
    spy.chmod(0o755)
    here, confined = unconfined_and_confined(workspace, spy)
    assert await find_text(confined, "needle") == await find_text(here, "needle")
    assert await list_paths(confined) == await list_paths(here)
    started = calls.read_text().splitlines()
    private = here.excluded[0]
    assert len(started) == 2 and all(f"--tmpfs {private}" in line for line in started)


def unconfined_and_confined(workspace: Path, bwrap: Path) -> tuple[WorkspaceAccess, WorkspaceAccess]:
    """The workspace searched here, and in a confined tenant's sandbox run by `bwrap`."""
    private = (workspace / "private").resolve()
    here = WorkspaceAccess(workspace, excluded=(private,), sandbox=UNSANDBOXED)
    view = View(host=False, writable=(workspace.resolve(),), hidden=(private,))
    return here, dataclasses.replace(here, sandbox=Sandbox(kind="bwrap", view=view, bwrap=bwrap))


@pytest.mark.parametrize("sandbox", [None, refused("bwrap is missing")], ids=["none", "refused"])
async def test_a_confined_tenant_without_a_sandbox_is_not_searched(
    workspace: Path, sandbox: Sandbox | None
) -> None:
    access = WorkspaceAccess(workspace, sandbox=sandbox)
    with pytest.raises(SearchUnavailableError, match="searched in its sandbox"):
        await find_text(access, "needle")
    with pytest.raises(SearchUnavailableError, match="searched in its sandbox"):
        await list_paths(access)


async def test_a_search_held_up_by_a_fifo_is_given_up(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SEARCH_TIMEOUT_SECONDS", 0.5)
    os.mkfifo(workspace / "src" / ".gitignore")  # ripgrep opens it to read the rules, and waits
    access = WorkspaceAccess(workspace, sandbox=UNSANDBOXED)
    for searching in (find_text(access, "needle"), list_paths(access)):
        with pytest.raises(SearchUnavailableError, match=r"took longer than 0\.5 s"):
            await searching


async def test_a_match_on_a_line_longer_than_the_readers_default_is_found(workspace: Path) -> None:
    (workspace / "docs" / "long.txt").write_text("x" * 200_000 + " needle\n")
    access = WorkspaceAccess(workspace, sandbox=UNSANDBOXED).at(str(workspace / "docs"))
    found = await find_text(access, "needle")
    assert sorted(m["path"]["text"] for m in found) == ["docs/guide.md", "docs/long.txt"]
