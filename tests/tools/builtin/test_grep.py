from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.grep import LIMIT, TRUNCATED_NOTE, GrepTool
from tests.tools.harness import Harness, src_swapped_while_asked

RIPGREP = shutil.which("rg")


@pytest.fixture(params=["python", "ripgrep"])
def tool(request: pytest.FixtureRequest) -> GrepTool:
    """Both search back ends must give the same answers."""
    if request.param == "python":
        return GrepTool(ripgrep=None)
    if RIPGREP is None:
        pytest.skip("ripgrep (rg) is not installed")
    return GrepTool(ripgrep=RIPGREP)


def put(path: Path, text: str, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


async def test_matches_grouped_by_file_newest_first(harness: Harness, tool: GrepTool) -> None:
    now = time.time()
    old = put(harness.workspace / "old.py", "def alpha():\n    pass\ndef beta():\n", now - 100)
    new = put(harness.workspace / "pkg" / "new.py", "x = 1\ndef gamma():\n", now - 10)
    put(harness.workspace / "other.txt", "nothing here\n")
    result = await harness.run(tool, pattern=r"def \w+")
    assert result.output == (
        "Found 3 matches\n"
        f"{new}:\n"
        "  Line 2: def gamma():\n"
        "\n"
        f"{old}:\n"
        "  Line 1: def alpha():\n"
        "  Line 3: def beta():"
    )
    assert result.title == r"def \w+"
    assert result.metadata["matches"] == 3
    assert result.metadata["limitReached"] is False
    [ask] = harness.asked("grep")
    assert ask.patterns == [r"def \w+"] and ask.always == ["*"]


async def test_no_match_says_no_files_found(harness: Harness, tool: GrepTool) -> None:
    put(harness.workspace / "a.txt", "hello\n")
    result = await harness.run(tool, pattern="absent")
    assert result.output == "No files found"


async def test_include_filters_files(harness: Harness, tool: GrepTool) -> None:
    put(harness.workspace / "a.ts", "needle\n")
    put(harness.workspace / "b.tsx", "needle\n")
    put(harness.workspace / "c.js", "needle\n")
    result = await harness.run(tool, pattern="needle", include="*.{ts,tsx}")
    assert result.output.startswith("Found 2 matches\n")
    assert str(harness.workspace / "c.js") not in result.output


async def test_path_may_be_a_directory_or_a_file(harness: Harness, tool: GrepTool) -> None:
    put(harness.workspace / "sub" / "a.txt", "needle\n")
    put(harness.workspace / "b.txt", "needle\n")
    in_dir = await harness.run(tool, pattern="needle", path="sub")
    assert in_dir.output == f"Found 1 matches\n{harness.workspace / 'sub' / 'a.txt'}:\n  Line 1: needle"
    in_file = await harness.run(tool, pattern="needle", path="b.txt")
    assert in_file.output == f"Found 1 matches\n{harness.workspace / 'b.txt'}:\n  Line 1: needle"


async def test_limit_of_100_matches(harness: Harness, tool: GrepTool) -> None:
    put(harness.workspace / "many.txt", "hit\n" * 150)
    result = await harness.run(tool, pattern="hit")
    lines = result.output.split("\n")
    assert lines[0] == "Found 100 matches (more matches available)"
    assert sum(1 for line in lines if line.startswith("  Line ")) == LIMIT
    assert lines[-1] == TRUNCATED_NOTE
    assert result.metadata["limitReached"] is True


async def test_long_match_lines_are_capped(harness: Harness, tool: GrepTool) -> None:
    put(harness.workspace / "wide.txt", "needle" + "x" * 3000 + "\n")
    result = await harness.run(tool, pattern="needle")
    line = result.output.split("\n")[2]
    assert line == "  Line 1: needle" + "x" * (2000 - len("needle")) + "..."


async def test_binary_files_git_and_node_modules_are_skipped(harness: Harness, tool: GrepTool) -> None:
    (harness.workspace / "blob.bin").write_bytes(b"needle\0\1\2")
    put(harness.workspace / ".git" / "HEAD", "needle\n")
    put(harness.workspace / "node_modules" / "x" / "i.js", "needle\n")
    hidden = put(harness.workspace / ".env.example", "needle\n")
    result = await harness.run(tool, pattern="needle")
    assert result.output == f"Found 1 matches\n{hidden}:\n  Line 1: needle"


async def test_paths_with_colons_survive(harness: Harness, tool: GrepTool) -> None:
    odd = put(harness.workspace / "a:b 1.txt", "x:y:needle\n")
    result = await harness.run(tool, pattern="needle")
    assert result.output == f"Found 1 matches\n{odd}:\n  Line 1: x:y:needle"


async def test_invalid_regex_is_a_tool_error(harness: Harness, tool: GrepTool) -> None:
    put(harness.workspace / "a.txt", "x\n")
    with pytest.raises(ToolError):
        await harness.run(tool, pattern="(unclosed")


async def test_search_outside_workspace_is_refused(harness: Harness, tool: GrepTool, tmp_path: Path) -> None:
    put(tmp_path / "secret.txt", "needle\n")
    for given in ("..", str(tmp_path), "../secret.txt"):
        with pytest.raises(ToolError, match="outside the workspace"):
            await harness.run(tool, pattern="needle", path=given)
    (harness.workspace / "link").symlink_to(tmp_path)
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(tool, pattern="needle", path="link")
    assert harness.asked("grep") == []


async def test_a_symlinked_file_leading_outside_is_not_searched(
    harness: Harness, tool: GrepTool, tmp_path: Path
) -> None:
    put(tmp_path / "other-tenant" / "secret.txt", "needle from outside\n")
    (harness.workspace / "peek.txt").symlink_to(tmp_path / "other-tenant" / "secret.txt")
    put(harness.workspace / "inside.txt", "needle inside\n")
    (harness.workspace / "alias.txt").symlink_to(harness.workspace / "inside.txt")
    result = await harness.run(tool, pattern="needle")
    assert "outside" not in result.output
    assert "needle inside" in result.output


async def test_missing_path(harness: Harness, tool: GrepTool) -> None:
    with pytest.raises(ToolError, match="Path not found"):
        await harness.run(tool, pattern="x", path="missing")


async def test_a_directory_swapped_for_a_symlink_while_the_grep_waits_is_not_searched(
    harness: Harness, tool: GrepTool, tmp_path: Path
) -> None:
    src_swapped_while_asked(harness, tmp_path / "outside")
    with pytest.raises(ToolError, match="no longer where its path led") as refused:
        await harness.run(tool, pattern="needle", path="src")
    assert "secret-name" not in str(refused.value) and "not yours" not in str(refused.value)


async def test_a_confined_tenant_is_searched_without_ripgrep(harness: Harness, tmp_path: Path) -> None:
    # ripgrep walks below the directory it is given by path, which the tenant's own commands could
    # race into another tenant's files: a confined tenant's search never starts it (here it could
    # not: the executable named does not exist), and still finds what is there.
    put(harness.workspace / "a.py", "needle = 1\n")
    harness.confine()
    result = await harness.run(GrepTool(ripgrep=str(tmp_path / "no-such-rg")), pattern="needle")
    assert result.metadata["matches"] == 1


async def test_a_fifo_is_not_searched(harness: Harness, tool: GrepTool) -> None:
    os.mkfifo(harness.workspace / "pipe")
    with pytest.raises(ToolError, match="neither a file nor a directory"):  # and nothing hangs
        await harness.run(tool, pattern="x", path="pipe")
