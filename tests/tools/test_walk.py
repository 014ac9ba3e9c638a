from __future__ import annotations

import os
from pathlib import Path

from agentforge.tools import pinned
from agentforge.tools.walk import MAX_DEPTH, walk_files


def walked(root: Path) -> dict[str, Path]:
    """relative -> path shown, walking `root` from its open directory."""
    with pinned.opened_directory(root, root.resolve()) as directory:
        return {found.relative: found.path for found in walk_files(root, root.resolve(), directory)}


def test_files_are_listed_relative_to_the_root_with_git_and_node_modules_skipped(tmp_path: Path) -> None:
    for relative in ("a.txt", "sub/b.txt", ".git/config", "node_modules/x/index.js"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x")
    assert list(walked(tmp_path)) == ["a.txt", "sub/b.txt"]


def test_symlinks_leading_outside_the_root_are_left_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (root / "real" / "kept.txt").write_text("k")
    (root / "file-link.txt").symlink_to(outside / "secret.txt")
    (root / "dir-link").symlink_to(outside)
    (root / "inner-link.txt").symlink_to(root / "real" / "kept.txt")
    found = walked(root)
    assert sorted(found) == ["inner-link.txt", "real/kept.txt"]
    assert found["inner-link.txt"] == root / "inner-link.txt"


def test_the_walk_stays_in_the_directory_opened_whatever_its_path_leads_to_since(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "mine.txt").write_text("m")
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    real = root.resolve()
    with pinned.opened_directory(root, real) as directory:
        root.rename(tmp_path / "moved")
        root.symlink_to(outside)  # the root's path now leads elsewhere
        names = [found.relative for found in walk_files(root, real, directory)]
    assert names == ["sub/mine.txt"]
    assert os.path.islink(root)


def test_the_walk_stops_at_its_depth(tmp_path: Path) -> None:
    # os.fwalk holds a descriptor per level: a deep chain must not take the process's last ones.
    deep = tmp_path.joinpath(*["d"] * (MAX_DEPTH + 5))
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("b")
    (tmp_path / "d" / "top.txt").write_text("t")
    assert list(walked(tmp_path)) == ["d/top.txt"]
