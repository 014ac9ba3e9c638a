"""The snapshot store: trees of a directory's files, what changed since one, and putting files back,
never through a symlink out of the directory and never into what is excluded."""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agentforge.snapshot.repo import SnapshotError, SnapshotRepo, repo_dir, unified_patch

if TYPE_CHECKING:
    import pygit2


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("one\n")
    (root / "sub" / "b.txt").write_text("b\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "other").mkdir()
    (root / "other" / "x.txt").write_text("not the tenant's\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("noise\n")
    return root


@pytest.fixture
def repo(tmp_path: Path, work: Path) -> SnapshotRepo:
    return SnapshotRepo(repo_dir(tmp_path / "data", work), work, excluded=["other"])


def test_the_store_lives_apart_from_the_work_tree_and_is_private(
    tmp_path: Path, repo: SnapshotRepo, work: Path
) -> None:
    repo.track()
    assert repo.git_dir.is_relative_to(tmp_path / "data" / "snapshots")
    assert stat.S_IMODE(repo.git_dir.stat().st_mode) == 0o700
    assert not (work / ".git").exists()
    assert sorted(p.name for p in work.iterdir()) == [
        ".gitignore",
        "a.txt",
        "debug.log",
        "other",
        "run.sh",
        "sub",
    ]


def test_changes_since_a_tree_and_restoring_them(repo: SnapshotRepo, work: Path) -> None:
    before = repo.track()
    (work / "a.txt").write_text("two\n")
    (work / "sub" / "b.txt").unlink()
    (work / "new.txt").write_text("new\n")
    (work / "other" / "x.txt").write_text("changed by someone else\n")
    (work / "debug.log").write_text("more noise\n")
    (work / "run.sh").chmod(0o644)
    changed = repo.changed(before)
    assert changed == ["a.txt", "new.txt", "run.sh", "sub/b.txt"]  # neither excluded nor ignored
    patch = unified_patch(repo.changes(before, changed))
    assert "-one\n+two\n" in patch and "+new\n" in patch and "-b\n" in patch

    report = repo.restore(before, changed)
    assert report.restored == changed and report.skipped == {}
    assert (work / "a.txt").read_text() == "one\n"
    assert (work / "sub" / "b.txt").read_text() == "b\n"
    assert not (work / "new.txt").exists()
    assert stat.S_IMODE((work / "run.sh").stat().st_mode) & 0o111
    assert (work / "other" / "x.txt").read_text() == "changed by someone else\n"
    assert repo.changed(before) == []


def test_restoring_a_later_tree_brings_the_changes_back(repo: SnapshotRepo, work: Path) -> None:
    before = repo.track()
    (work / "a.txt").write_text("two\n")
    (work / "new.txt").write_text("new\n")
    after = repo.track()
    repo.restore(before, ["a.txt", "new.txt"])
    repo.restore(after, ["a.txt", "new.txt"])
    assert (work / "a.txt").read_text() == "two\n" and (work / "new.txt").read_text() == "new\n"


def sub_led_out(tmp_path: Path, work: Path, text: str) -> Path:
    """After the snapshot, `sub` became a symlink to a directory outside holding a `b.txt` of `text`."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "b.txt").write_text(text)
    (work / "sub" / "b.txt").unlink()
    (work / "sub").rmdir()
    os.symlink(outside, work / "sub")
    return outside


def test_a_restore_never_writes_through_a_symlink_out_of_the_work_tree(
    tmp_path: Path, repo: SnapshotRepo, work: Path
) -> None:
    before = repo.track()
    outside = sub_led_out(tmp_path, work, "outside\n")
    report = repo.restore(before, ["sub/b.txt", "other/x.txt"])
    assert set(report.skipped) == {"sub/b.txt", "other/x.txt"}
    assert (outside / "b.txt").read_text() == "outside\n"


def test_a_directory_turned_into_a_symlink_shows_nothing_of_where_it_leads(
    tmp_path: Path, repo: SnapshotRepo, work: Path
) -> None:
    before = repo.track()
    sub_led_out(tmp_path, work, "another tenant's secret\n")
    [change] = repo.changes(before, ["sub/b.txt"])
    assert (change.status, change.before, change.after) == ("deleted", "b\n", None)
    assert "secret" not in unified_patch([change])


def test_a_fifo_where_a_file_was_does_not_hang_the_diff(repo: SnapshotRepo, work: Path) -> None:
    before = repo.track()
    (work / "a.txt").unlink()
    os.mkfifo(work / "a.txt")
    found: list[list[str]] = []
    diffing = threading.Thread(
        target=lambda: found.append([c.status for c in repo.changes(before, ["a.txt"])]), daemon=True
    )
    diffing.start()
    diffing.join(timeout=30)  # a read of the FIFO would wait for a writer forever
    assert found == [["deleted"]]


def test_a_file_turned_into_a_symlink_is_replaced_not_followed(
    tmp_path: Path, repo: SnapshotRepo, work: Path
) -> None:
    before = repo.track()
    target = tmp_path / "target.txt"
    target.write_text("do not touch\n")
    (work / "a.txt").unlink()
    os.symlink(target, work / "a.txt")
    repo.restore(before, ["a.txt"])
    assert not (work / "a.txt").is_symlink() and (work / "a.txt").read_text() == "one\n"
    assert target.read_text() == "do not touch\n"


def test_an_unknown_tree_is_an_error(repo: SnapshotRepo) -> None:
    repo.track()
    with pytest.raises(SnapshotError):
        repo.restore("0" * 40, ["a.txt"])


def test_a_fifo_or_a_file_in_the_way_of_a_restore_is_handled(repo: SnapshotRepo, work: Path) -> None:
    before = repo.track()
    (work / "a.txt").unlink()
    os.mkfifo(work / "a.txt")  # opened for writing, it would wait for a reader forever
    (work / "sub" / "b.txt").unlink()
    (work / "sub").rmdir()
    (work / "sub").write_text("a file where the directory was\n")
    report = repo.restore(before, ["a.txt", "sub/b.txt"])
    assert report.restored == ["a.txt"] and (work / "a.txt").read_text() == "one\n"
    assert list(report.skipped) == ["sub/b.txt"] and "could not be written" in report.skipped["sub/b.txt"]


_RENAME_EXCHANGE = 2


def _exchange(first: Path, second: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(first), -100, os.fsencode(second), _RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


def test_a_directory_swapped_while_the_snapshot_walks_stores_nothing_of_where_it_led(
    tmp_path: Path, repo: SnapshotRepo, work: Path
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "secret.txt").write_text("BETA SECRET\n")
    (work / ".gitignore").write_text("*.log\n/alt\n")
    os.symlink(theirs, work / "alt")
    stop = threading.Event()

    def flip() -> None:  # the tenant's command: `sub` and a symlink out, exchanged again and again
        while not stop.is_set():
            _exchange(work / "sub", work / "alt")

    flipping = threading.Thread(target=flip, daemon=True)
    flipping.start()
    trees: list[str] = []
    try:
        for _ in range(400):
            with contextlib.suppress(SnapshotError):  # libgit2 may trip over the swap itself
                trees.append(repo.track())
    finally:
        stop.set()
        flipping.join()
    if (work / "sub").is_symlink():
        _exchange(work / "sub", work / "alt")
    import pygit2

    store = pygit2.Repository(str(repo.git_dir))
    blobs = [store[blob] for tree in trees for blob in _blobs(store, store[tree])]
    leaked = [blob for blob in blobs if isinstance(blob, pygit2.Blob) and b"BETA SECRET" in blob.data]
    assert trees and leaked == []


def _blobs(store: pygit2.Repository, tree: pygit2.Object) -> list[pygit2.Oid]:
    import pygit2

    assert isinstance(tree, pygit2.Tree)
    found: list[pygit2.Oid] = []
    for entry in tree:
        if entry.type_str == "tree":
            found.extend(_blobs(store, store[entry.id]))
        else:
            found.append(entry.id)
    return found


def test_an_edit_of_line_endings_alone_is_a_change_whatever_the_attributes_say(
    repo: SnapshotRepo, work: Path
) -> None:
    (work / ".gitattributes").write_text("* text eol=crlf\n")
    before = repo.track()
    (work / "a.txt").write_bytes(b"one\r\n")
    assert repo.changed(before) == ["a.txt"]
    repo.restore(before, ["a.txt"])
    assert (work / "a.txt").read_bytes() == b"one\n"


def test_a_locked_index_is_a_snapshot_error(repo: SnapshotRepo) -> None:
    repo.track()
    (repo.git_dir / "index.lock").write_text("")  # a writer that died holding it
    with pytest.raises(SnapshotError, match="could not snapshot"):
        repo.track()
