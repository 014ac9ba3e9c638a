"""Listing a directory and reading a file where the path check saw them: a directory on the way
swapped for a symlink between the check and the read (a command the tenant runs beside the request)
is refused, not followed into another tenant's files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentforge.workspace.access import OutsideWorkspaceError, WorkspaceAccess
from agentforge.workspace.files import list_directory, read_file

SECRET = "the other tenant's notes"


def swapped_after_check(root: Path, swap: Callable[[], None]) -> WorkspaceAccess:
    """The local user's access to `root`, with `swap` run right after each path's check."""

    class Racing(WorkspaceAccess):
        def locate(self, raw: str | Path) -> tuple[Path, Path]:
            checked = super().locate(raw)
            swap()
            return checked

    return Racing(root, repo_above=True)


@pytest.fixture
def tenants(tmp_path: Path) -> tuple[Path, Path]:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for root, text in ((mine, "my notes\n"), (theirs, f"{SECRET}\n")):
        (root / "docs").mkdir(parents=True)
        (root / "docs" / "notes.txt").write_text(text)
    (theirs / "docs" / "only-theirs.txt").write_text("x\n")
    return mine, theirs


def swap_docs(mine: Path, theirs: Path) -> Callable[[], None]:
    def swap() -> None:
        (mine / "docs").rename(mine / "docs.moved")
        os.symlink(theirs / "docs", mine / "docs")

    return swap


async def test_reads_and_listings_without_a_race(tenants: tuple[Path, Path]) -> None:
    mine, _ = tenants
    access = WorkspaceAccess(mine, repo_above=True)
    assert (await read_file(access, "docs/notes.txt")).content == "my notes\n"
    assert [node.name for node in await list_directory(access, "docs")] == ["notes.txt"]


async def test_a_file_whose_directory_was_swapped_after_the_check_is_not_read(
    tenants: tuple[Path, Path],
) -> None:
    mine, theirs = tenants
    access = swapped_after_check(mine, swap_docs(mine, theirs))
    with pytest.raises(OutsideWorkspaceError, match="its path changed while it was read"):
        await read_file(access, "docs/notes.txt")


async def test_a_directory_swapped_after_the_check_is_not_listed(tenants: tuple[Path, Path]) -> None:
    mine, theirs = tenants
    access = swapped_after_check(mine, swap_docs(mine, theirs))
    with pytest.raises(OutsideWorkspaceError, match="is not a directory"):
        await list_directory(access, "docs")


async def test_a_symlink_is_listed_as_a_directory_only_when_it_leads_into_the_workspace(
    tenants: tuple[Path, Path],
) -> None:
    mine, theirs = tenants
    os.symlink(mine / "docs", mine / "inside")
    os.symlink(theirs / "docs", mine / "outside")  # what kind of thing it leads to stays unknown
    listing = await list_directory(WorkspaceAccess(mine, repo_above=True), "")
    assert {node.name: node.type for node in listing} == {
        "docs": "directory",
        "inside": "directory",
        "outside": "file",
    }


async def test_a_symlink_loop_is_listed_and_refused_not_a_500(tenants: tuple[Path, Path]) -> None:
    mine, _ = tenants
    os.symlink("loop", mine / "loop")
    access = WorkspaceAccess(mine, repo_above=True)
    assert {node.name: node.type for node in await list_directory(access, "")} == {
        "docs": "directory",
        "loop": "file",
    }
    with pytest.raises(OutsideWorkspaceError, match="symlink loop"):
        await read_file(access, "loop")
