from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.builtin.edit import EditTool
from agentforge.tools.builtin.read import ReadTool
from agentforge.tools.replace import MULTIPLE, NOT_FOUND
from tests.tools.harness import Harness, approved_after


async def read_first(harness: Harness, name: str, content: str | bytes) -> Path:
    path = harness.workspace / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    await harness.run(ReadTool(), filePath=name)
    return path


async def test_replaces_a_unique_string(harness: Harness) -> None:
    path = await read_first(harness, "a.py", "x = 1\ny = 2\n")
    result = await harness.run(EditTool(), filePath="a.py", oldString="y = 2", newString="y = 3")
    assert path.read_text() == "x = 1\ny = 3\n"
    assert result.output == "Edit applied successfully."
    assert result.title == "a.py"
    filediff = result.metadata["filediff"]
    assert filediff["file"] == str(path)
    assert (filediff["additions"], filediff["deletions"]) == (1, 1)
    assert result.metadata["diff"] == filediff["patch"]
    assert "-y = 2\n+y = 3\n" in filediff["patch"]
    [ask] = harness.asked("edit")
    assert ask.patterns == ["a.py"] and ask.always == ["*"]
    assert ask.metadata["filepath"] == str(path) and ask.metadata["diff"] == filediff["patch"]


async def test_identical_strings_are_an_error(harness: Harness) -> None:
    await read_first(harness, "a.py", "x\n")
    with pytest.raises(ToolError, match="oldString and newString are identical"):
        await harness.run(EditTool(), filePath="a.py", oldString="x", newString="x")


async def test_not_found_and_multiple_matches_messages(harness: Harness) -> None:
    await read_first(harness, "a.py", "a = 1\na = 1\n")
    with pytest.raises(ToolError) as missing:
        await harness.run(EditTool(), filePath="a.py", oldString="zzz", newString="y")
    assert str(missing.value) == NOT_FOUND
    with pytest.raises(ToolError) as multiple:
        await harness.run(EditTool(), filePath="a.py", oldString="a = 1", newString="b")
    assert str(multiple.value) == MULTIPLE


async def test_replace_all(harness: Harness) -> None:
    path = await read_first(harness, "a.py", "a = 1\na = 1\n")
    await harness.run(EditTool(), filePath="a.py", oldString="a = 1", newString="b = 2", replaceAll=True)
    assert path.read_text() == "b = 2\nb = 2\n"


async def test_fuzzy_match_with_wrong_indentation(harness: Harness) -> None:
    path = await read_first(harness, "a.py", "def f():\n    if x:\n        return 1\n")
    await harness.run(
        EditTool(), filePath="a.py", oldString="if x:\n    return 1", newString="    if y:\n        return 2"
    )
    assert path.read_text() == "def f():\n    if y:\n        return 2\n"


async def test_crlf_file_stays_crlf(harness: Harness) -> None:
    path = await read_first(harness, "win.txt", b"one\r\ntwo\r\nthree\r\n")
    result = await harness.run(EditTool(), filePath="win.txt", oldString="two\nthree", newString="2\n3")
    assert path.read_bytes() == b"one\r\n2\r\n3\r\n"
    assert "\r" not in result.metadata["diff"]


async def test_lf_file_stays_lf_when_new_string_has_crlf(harness: Harness) -> None:
    path = await read_first(harness, "unix.txt", "one\ntwo\n")
    await harness.run(EditTool(), filePath="unix.txt", oldString="two", newString="2\r\n2b")
    assert path.read_bytes() == b"one\n2\n2b\n"


async def test_empty_old_string_creates_a_file(harness: Harness) -> None:
    result = await harness.run(EditTool(), filePath="new/file.txt", oldString="", newString="hello\n")
    assert (harness.workspace / "new" / "file.txt").read_text() == "hello\n"
    assert result.metadata["filediff"]["additions"] == 1


async def test_empty_old_string_overwrites_a_read_file(harness: Harness) -> None:
    path = await read_first(harness, "a.txt", "old\n")
    await harness.run(EditTool(), filePath="a.txt", oldString="", newString="new\n")
    assert path.read_text() == "new\n"


async def test_empty_old_string_on_unread_existing_file_is_refused(harness: Harness) -> None:
    (harness.workspace / "a.txt").write_text("old\n")
    with pytest.raises(ToolError, match="You must read file"):
        await harness.run(EditTool(), filePath="a.txt", oldString="", newString="new\n")


async def test_unread_file_is_refused(harness: Harness) -> None:
    (harness.workspace / "a.txt").write_text("x\n")
    with pytest.raises(ToolError, match="You must read file"):
        await harness.run(EditTool(), filePath="a.txt", oldString="x", newString="y")


async def test_stale_file_is_refused(harness: Harness) -> None:
    path = await read_first(harness, "a.txt", "x\n")
    path.write_text("x changed\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(ToolError, match="has been modified since it was last read"):
        await harness.run(EditTool(), filePath="a.txt", oldString="x", newString="y")


async def test_successive_edits_do_not_need_rereading(harness: Harness) -> None:
    path = await read_first(harness, "a.txt", "a\nb\n")
    await harness.run(EditTool(), filePath="a.txt", oldString="a", newString="A")
    await harness.run(EditTool(), filePath="a.txt", oldString="b", newString="B")
    assert path.read_text() == "A\nB\n"


async def test_missing_file_and_directory_errors(harness: Harness) -> None:
    with pytest.raises(ToolError, match="not found"):
        await harness.run(EditTool(), filePath="nope.txt", oldString="a", newString="b")
    (harness.workspace / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await harness.run(EditTool(), filePath="dir", oldString="a", newString="b")


async def test_concurrent_edits_of_one_file_are_serialised(harness: Harness) -> None:
    path = await read_first(harness, "a.txt", "".join(f"v{i} = 0\n" for i in range(10)))
    await asyncio.gather(
        *(
            harness.run(EditTool(), filePath="a.txt", oldString=f"v{i} = 0", newString=f"v{i} = {i + 1}")
            for i in range(10)
        )
    )
    assert path.read_text() == "".join(f"v{i} = {i + 1}\n" for i in range(10))


async def test_edits_outside_the_workspace_are_refused(harness: Harness, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    target.write_text("x\n")
    for given in ("../outside.txt", str(target)):
        with pytest.raises(ToolError, match="outside the workspace"):
            await harness.run(EditTool(), filePath=given, oldString="x", newString="y")
    (harness.workspace / "link.txt").symlink_to(target)
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(EditTool(), filePath="link.txt", oldString="x", newString="y")
    assert target.read_text() == "x\n"


def put_back_quietly(path: Path) -> None:
    """A same-size change with its modification time put back, as `cp -p` or `touch -r` leave it."""
    before = path.stat()
    path.write_text("x = 9\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def swapped_for_a_symlink(path: Path) -> None:
    """The file replaced by a symlink to one outside the workspace (which holds the same text)."""
    outside = path.parent.parent / "outside.py"
    outside.write_text("x = 1\n")
    path.unlink()
    path.symlink_to(outside)


@pytest.mark.parametrize(
    ("change", "what", "left"),
    [
        (lambda path: path.write_text("x = 1\ny = 'theirs'\n"), "was modified", "x = 1\ny = 'theirs'\n"),
        (Path.unlink, "was deleted", None),  # not made again
        (put_back_quietly, "was modified", "x = 9\n"),  # the change time tells
        (swapped_for_a_symlink, "was modified", "x = 1\n"),  # not written through: outside unchanged
    ],
    ids=["modified", "deleted", "time-put-back", "symlink"],
)
async def test_a_file_changed_while_the_edit_waits_for_approval_is_left_as_changed(
    harness: Harness, change: Callable[[Path], object], what: str, left: str | None
) -> None:
    path = await read_first(harness, "a.py", "x = 1\n")
    harness.ask_override = approved_after(lambda: change(path))
    with pytest.raises(ToolError, match=f"File {path} {what} while this change waited"):
        await harness.run(EditTool(), filePath="a.py", oldString="x = 1", newString="x = 2")
    assert (path.read_text() if path.exists() else None) == left


async def test_a_symlinked_name_counts_as_read_for_the_file_it_leads_to(harness: Harness) -> None:
    real = harness.workspace / "real.py"
    real.write_text("x = 1\n")
    (harness.workspace / "link.py").symlink_to(real)
    await harness.run(ReadTool(), filePath="link.py")
    await harness.run(EditTool(), filePath="real.py", oldString="x = 1", newString="x = 2")
    assert real.read_text() == "x = 2\n"


async def test_a_file_created_while_its_creation_waits_is_kept(harness: Harness) -> None:
    path = harness.workspace / "new.py"
    harness.ask_override = approved_after(lambda: path.write_text("theirs\n"))
    with pytest.raises(ToolError, match=f"File {path} was created while this change waited"):
        await harness.run(EditTool(), filePath="new.py", oldString="", newString="mine\n")
    assert path.read_text() == "theirs\n"


async def test_an_approved_edit_counts_as_read_for_the_next(harness: Harness) -> None:
    path = await read_first(harness, "a.py", "x = 1\n")
    await harness.run(EditTool(), filePath="a.py", oldString="x = 1", newString="x = 2")
    await harness.run(EditTool(), filePath="a.py", oldString="x = 2", newString="x = 3")
    assert path.read_text() == "x = 3\n"


async def test_text_that_cannot_be_written_leaves_the_file_as_it_was(harness: Harness) -> None:
    path = await read_first(harness, "a.py", "x = 1\n")
    with pytest.raises(ToolError, match=f"Cannot write {path}: the content is not valid text"):
        await harness.run(EditTool(), filePath="a.py", oldString="x = 1", newString="x = '\ud800'")
    assert path.read_text() == "x = 1\n"
