from __future__ import annotations

from pathlib import Path

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.list import TRUNCATED_NOTE, ListTool
from tests.tools.harness import Harness, src_swapped_while_asked


def put(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


async def test_tree_listing_dirs_first_then_files(harness: Harness) -> None:
    put(harness.workspace / "README.md")
    put(harness.workspace / "src" / "app.py")
    put(harness.workspace / "src" / "util" / "io.py")
    (harness.workspace / "empty").mkdir()
    result = await harness.run(ListTool())
    assert result.output == (
        f"{harness.workspace}/\n  empty/\n  src/\n    util/\n      io.py\n    app.py\n  README.md\n"
    )
    assert result.metadata == {"count": 6, "truncated": False}
    assert result.title == "."
    [ask] = harness.asked("list")
    assert ask.patterns == [str(harness.workspace)]


async def test_default_ignores(harness: Harness) -> None:
    for ignored in ("node_modules/x.js", ".git/HEAD", "__pycache__/a.pyc", ".venv/bin/python", "dist/a.js"):
        put(harness.workspace / ignored)
    put(harness.workspace / "keep.py")
    result = await harness.run(ListTool())
    assert result.output == f"{harness.workspace}/\n  keep.py\n"


async def test_custom_ignore_globs(harness: Harness) -> None:
    put(harness.workspace / "a.log")
    put(harness.workspace / "logs2" / "b.log")
    put(harness.workspace / "fixtures" / "big.json")
    put(harness.workspace / "main.py")
    result = await harness.run(ListTool(), ignore=["*.log", "fixtures"])
    assert result.output == f"{harness.workspace}/\n  logs2/\n  main.py\n"


async def test_subdirectory_path(harness: Harness) -> None:
    put(harness.workspace / "pkg" / "mod.py")
    result = await harness.run(ListTool(), path="pkg")
    assert result.output == f"{harness.workspace / 'pkg'}/\n  mod.py\n"
    assert result.title == "pkg"


async def test_limit_is_breadth_first(harness: Harness) -> None:
    for i in range(150):
        put(harness.workspace / "a_big" / f"f{i:03}.txt")
    put(harness.workspace / "z_top.txt")
    result = await harness.run(ListTool())
    assert "  z_top.txt\n" in result.output  # the top level is not hidden behind a_big's files
    assert result.output.endswith("\n" + TRUNCATED_NOTE)
    assert result.metadata == {"count": 100, "truncated": True}


async def test_outside_workspace_is_refused(harness: Harness, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(ListTool(), path="..")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(ListTool(), path=str(tmp_path))
    (harness.workspace / "link").symlink_to(tmp_path)
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(ListTool(), path="link")


async def test_missing_directory(harness: Harness) -> None:
    with pytest.raises(ToolError, match="Directory not found"):
        await harness.run(ListTool(), path="missing")


async def test_a_directory_swapped_for_a_symlink_while_the_list_waits_is_not_walked(
    harness: Harness, tmp_path: Path
) -> None:
    src_swapped_while_asked(harness, tmp_path / "outside")
    with pytest.raises(ToolError, match="no longer where its path led") as refused:
        await harness.run(ListTool(), path="src")
    assert "secret-name" not in str(refused.value) and "not yours" not in str(refused.value)
