from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.read import ReadTool
from agentforge.tools.builtin.write import WriteTool
from tests.tools.harness import Harness, approved_after, assert_fresh


async def test_creates_a_new_file_with_parent_dirs(harness: Harness) -> None:
    result = await harness.run(WriteTool(), filePath="pkg/sub/new.py", content="print('hi')\n")
    path = harness.workspace / "pkg" / "sub" / "new.py"
    assert path.read_text() == "print('hi')\n"
    assert result.output == "Wrote file successfully."
    assert result.title == "pkg/sub/new.py"
    assert result.metadata["filepath"] == str(path)
    assert result.metadata["exists"] is False
    assert "+print('hi')" in result.metadata["diff"]
    [ask] = harness.asked("edit")
    assert ask.patterns == ["pkg/sub/new.py"] and ask.always == ["*"]
    assert ask.metadata == {"filepath": str(path), "diff": result.metadata["diff"]}


async def test_existing_file_must_be_read_first(harness: Harness) -> None:
    (harness.workspace / "a.txt").write_text("old\n")
    with pytest.raises(ToolError, match=r"You must read file .* before overwriting it"):
        await harness.run(WriteTool(), filePath="a.txt", content="new\n")
    assert (harness.workspace / "a.txt").read_text() == "old\n"


async def test_overwrites_after_reading_and_shows_a_diff(harness: Harness) -> None:
    (harness.workspace / "a.txt").write_text("old\n")
    await harness.run(ReadTool(), filePath="a.txt")
    result = await harness.run(WriteTool(), filePath="a.txt", content="new\n")
    assert (harness.workspace / "a.txt").read_text() == "new\n"
    assert result.metadata["exists"] is True
    assert "-old\n+new\n" in result.metadata["diff"]


async def test_stale_file_is_refused(harness: Harness) -> None:
    path = harness.workspace / "a.txt"
    path.write_text("old\n")
    await harness.run(ReadTool(), filePath="a.txt")
    path.write_text("changed by someone else\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(ToolError, match="has been modified since it was last read"):
        await harness.run(WriteTool(), filePath="a.txt", content="mine\n")
    assert path.read_text() == "changed by someone else\n"


async def test_consecutive_writes_do_not_need_a_read_in_between(harness: Harness) -> None:
    await harness.run(WriteTool(), filePath="a.txt", content="one\n")
    await harness.run(WriteTool(), filePath="a.txt", content="two\n")
    assert (harness.workspace / "a.txt").read_text() == "two\n"
    assert_fresh(harness.session_id, harness.workspace / "a.txt")


async def test_content_is_written_byte_for_byte(harness: Harness) -> None:
    await harness.run(WriteTool(), filePath="crlf.txt", content="a\r\nb\r\n")
    assert (harness.workspace / "crlf.txt").read_bytes() == b"a\r\nb\r\n"


async def test_directory_path_is_refused(harness: Harness) -> None:
    (harness.workspace / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await harness.run(WriteTool(), filePath="dir", content="x")


async def test_writes_outside_the_workspace_are_refused(harness: Harness, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(WriteTool(), filePath="../escape.txt", content="x")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(WriteTool(), filePath=str(tmp_path / "abs.txt"), content="x")
    (tmp_path / "out").mkdir()
    (harness.workspace / "link").symlink_to(tmp_path / "out")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(WriteTool(), filePath="link/f.txt", content="x")
    assert not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "abs.txt").exists()
    assert not (tmp_path / "out" / "f.txt").exists()
    assert harness.asked("edit") == []


async def test_a_file_changed_while_the_write_waits_for_approval_is_not_written_over(
    harness: Harness,
) -> None:
    path = harness.workspace / "a.txt"
    path.write_text("old\n")
    await harness.run(ReadTool(), filePath="a.txt")
    harness.ask_override = approved_after(lambda: path.write_text("theirs, longer\n"))
    with pytest.raises(ToolError, match=f"File {path} was modified while this change waited"):
        await harness.run(WriteTool(), filePath="a.txt", content="mine\n")
    assert path.read_text() == "theirs, longer\n"


async def test_a_file_created_while_the_write_waits_is_kept(harness: Harness) -> None:
    path = harness.workspace / "new.txt"
    harness.ask_override = approved_after(lambda: path.write_text("theirs\n"))
    with pytest.raises(ToolError, match=f"File {path} was created while this change waited"):
        await harness.run(WriteTool(), filePath="new.txt", content="mine\n")
    assert path.read_text() == "theirs\n"


async def test_a_directory_swapped_for_a_symlink_while_the_write_waits_is_not_written_through(
    harness: Harness, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (harness.workspace / "docs").mkdir()

    def swap() -> None:
        (harness.workspace / "docs").rmdir()
        (harness.workspace / "docs").symlink_to(outside)

    harness.ask_override = approved_after(swap)
    with pytest.raises(ToolError, match="no longer where its path led"):
        await harness.run(WriteTool(), filePath="docs/new.md", content="mine\n")
    assert list(outside.iterdir()) == []


async def test_a_dangling_symlink_put_where_a_new_file_goes_is_not_written_through(
    harness: Harness, tmp_path: Path
) -> None:
    target = tmp_path / "planted.txt"
    path = harness.workspace / "new.txt"
    harness.ask_override = approved_after(lambda: path.symlink_to(target))
    with pytest.raises(ToolError, match=f"File {path} was created while this change waited"):
        await harness.run(WriteTool(), filePath="new.txt", content="mine\n")
    assert not target.exists()
