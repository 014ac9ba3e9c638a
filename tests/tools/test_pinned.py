"""Opening a path where its check saw it lead: a symlink put anywhere in it since is refused, never
followed; a file in the way is no move."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentforge.tools import pinned
from agentforge.tools.base import ToolError


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory the checked paths must never reach, with a file in it."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "secret.txt").write_text("not yours\n")
    return place


@pytest.fixture
def root(tmp_path: Path) -> Path:
    place = (tmp_path / "workspace").resolve()
    (place / "sub").mkdir(parents=True)
    (place / "sub" / "a.txt").write_text("a\n")
    return place


def read(real: Path) -> bytes:
    found = pinned.read_file(real, real)
    assert found is not None
    return found[0]


def test_a_path_as_checked_opens(root: Path) -> None:
    assert read(root / "sub" / "a.txt") == b"a\n"
    assert pinned.read_file(root / "sub" / "missing.txt", root / "sub" / "missing.txt") is None
    fd = pinned.open_file(Path("/"), os.O_RDONLY)  # the root itself
    os.close(fd)


def test_a_symlink_put_in_place_of_the_file_is_refused(root: Path, outside: Path) -> None:
    checked = root / "sub" / "a.txt"
    checked.unlink()
    checked.symlink_to(outside / "secret.txt")
    with pytest.raises(pinned.PathMovedError, match="no longer where its path led"):
        read(checked)
    with pytest.raises(pinned.PathMovedError):
        pinned.open_file(checked, os.O_WRONLY)
    assert (outside / "secret.txt").read_text() == "not yours\n"


def test_a_symlink_put_in_place_of_a_directory_on_the_way_is_refused(root: Path, outside: Path) -> None:
    checked = root / "sub" / "secret.txt"
    (root / "sub").rename(root / "elsewhere")
    (root / "sub").symlink_to(outside)
    with pytest.raises(pinned.PathMovedError):
        read(checked)
    with pytest.raises(pinned.PathMovedError):  # nor made through it
        pinned.open_file(root / "sub" / "new" / "b.txt", os.O_WRONLY | os.O_CREAT, make_parents=True)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_file_in_the_way_names_nothing(root: Path) -> None:
    assert pinned.read_file(root / "sub" / "a.txt" / "b", root / "sub" / "a.txt" / "b") is None
    assert pinned.lstat(root / "sub" / "a.txt" / "b") is None
    with pytest.raises(NotADirectoryError):
        pinned.open_file(root / "sub" / "a.txt" / "b", os.O_WRONLY | os.O_CREAT, make_parents=True)


def test_missing_directories_are_made_on_the_way(root: Path) -> None:
    fd = pinned.open_file(root / "x" / "y" / "b.txt", os.O_WRONLY | os.O_CREAT, make_parents=True)
    os.close(fd)
    assert (root / "x" / "y" / "b.txt").is_file()


def test_unlink_removes_a_symlink_never_its_target(root: Path, outside: Path) -> None:
    link = root / "sub" / "link.txt"
    link.symlink_to(outside / "secret.txt")
    lstat = pinned.lstat(link)
    assert lstat is not None and os.path.islink(link)
    pinned.unlink(link)
    assert not os.path.lexists(link) and (outside / "secret.txt").exists()


def test_anything_but_a_regular_file_is_refused(root: Path) -> None:
    fifo = root / "sub" / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ToolError, match="not a regular file"):  # and the open did not block
        pinned.read_file(fifo, fifo)
    with pytest.raises(ToolError, match="is a directory"):
        pinned.read_file(root / "sub", root / "sub")
