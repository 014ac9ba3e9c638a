from __future__ import annotations

from pathlib import Path

from agentforge.tools.walk import walk_files


def test_files_are_listed_relative_to_the_root_with_git_and_node_modules_skipped(tmp_path: Path) -> None:
    for relative in ("a.txt", "sub/b.txt", ".git/config", "node_modules/x/index.js"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x")
    assert [relative for _, relative in walk_files(tmp_path)] == ["a.txt", "sub/b.txt"]


def test_symlinks_leading_outside_the_root_are_left_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (root / "real" / "kept.txt").write_text("k")
    (root / "file-link.txt").symlink_to(outside / "secret.txt")
    (root / "dir-link").symlink_to(outside)
    (root / "inner-link.txt").symlink_to(root / "real" / "kept.txt")
    walked = dict((relative, path) for path, relative in walk_files(root))
    assert sorted(walked) == ["inner-link.txt", "real/kept.txt"]
    assert walked["inner-link.txt"] == root / "inner-link.txt"
