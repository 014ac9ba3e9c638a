from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.glob import TRUNCATED_NOTE, GlobTool
from tests.tools.harness import Harness, src_swapped_while_asked


def touch(path: Path, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


async def test_matches_newest_first_as_absolute_paths(harness: Harness) -> None:
    now = time.time()
    old = touch(harness.workspace / "old.py", now - 300)
    new = touch(harness.workspace / "pkg" / "new.py", now - 10)
    mid = touch(harness.workspace / "pkg" / "deep" / "mid.py", now - 100)
    touch(harness.workspace / "notes.txt")
    result = await harness.run(GlobTool(), pattern="**/*.py")
    assert result.output.split("\n") == [str(new), str(mid), str(old)]
    assert result.metadata == {"count": 3, "truncated": False}
    assert result.title == "."
    [ask] = harness.asked("glob")
    assert ask.patterns == ["**/*.py"] and ask.always == ["*"]


async def test_pattern_without_slash_matches_at_any_depth(harness: Harness) -> None:
    touch(harness.workspace / "a" / "b" / "c.md")
    result = await harness.run(GlobTool(), pattern="*.md")
    assert result.output == str(harness.workspace / "a" / "b" / "c.md")


async def test_anchored_pattern_and_search_path(harness: Harness) -> None:
    touch(harness.workspace / "src" / "x.ts")
    touch(harness.workspace / "src" / "inner" / "y.ts")
    touch(harness.workspace / "other" / "src" / "z.ts")
    top = await harness.run(GlobTool(), pattern="src/*.ts")
    assert top.output == str(harness.workspace / "src" / "x.ts")
    scoped = await harness.run(GlobTool(), pattern="*.ts", path="other")
    assert scoped.output == str(harness.workspace / "other" / "src" / "z.ts")
    assert scoped.title == "other"


async def test_absolute_pattern_under_the_search_root(harness: Harness) -> None:
    touch(harness.workspace / "src" / "x.ts")
    result = await harness.run(GlobTool(), pattern=f"{harness.workspace}/src/*.ts")
    assert result.output == str(harness.workspace / "src" / "x.ts")


async def test_no_match(harness: Harness) -> None:
    result = await harness.run(GlobTool(), pattern="*.nothing")
    assert result.output == "No files found"
    assert result.metadata == {"count": 0, "truncated": False}


async def test_limit_of_100_with_truncation_note(harness: Harness) -> None:
    for i in range(120):
        touch(harness.workspace / f"f{i:03}.txt")
    result = await harness.run(GlobTool(), pattern="*.txt")
    lines = result.output.split("\n")
    assert len(lines) == 100 + 2
    assert lines[-1] == TRUNCATED_NOTE
    assert result.metadata == {"count": 100, "truncated": True}


async def test_git_and_node_modules_are_skipped_but_hidden_files_are_not(harness: Harness) -> None:
    touch(harness.workspace / ".git" / "config.js")
    touch(harness.workspace / "node_modules" / "lib" / "index.js")
    hidden = touch(harness.workspace / ".config" / "app.js")
    result = await harness.run(GlobTool(), pattern="*.js")
    assert result.output == str(hidden)


async def test_search_path_outside_workspace_is_refused(harness: Harness, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(GlobTool(), pattern="*", path="..")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(GlobTool(), pattern="*", path=str(tmp_path))
    (harness.workspace / "link").symlink_to(tmp_path)
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(GlobTool(), pattern="*", path="link")


async def test_missing_directory(harness: Harness) -> None:
    with pytest.raises(ToolError, match="Directory not found"):
        await harness.run(GlobTool(), pattern="*", path="missing")


async def test_a_directory_swapped_for_a_symlink_while_the_glob_waits_is_not_walked(
    harness: Harness, tmp_path: Path
) -> None:
    src_swapped_while_asked(harness, tmp_path / "outside")
    with pytest.raises(ToolError, match="no longer where its path led") as refused:
        await harness.run(GlobTool(), pattern="**/*", path="src")
    assert "secret-name" not in str(refused.value) and "not yours" not in str(refused.value)
