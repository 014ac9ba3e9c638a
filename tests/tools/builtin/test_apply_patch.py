from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from agentforge.tools.base import PermissionDeniedError, PermissionRequest, ToolError, ToolResult
from agentforge.tools.builtin.apply_patch import ApplyPatchTool
from agentforge.tools.builtin.read import ReadTool
from agentforge.tools.execute import run_tool
from tests.tools.harness import Harness, approved_after


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


async def apply(harness: Harness, *lines: str) -> ToolResult:
    return await harness.run(ApplyPatchTool(), patchText=patch(*lines))


async def read_first(harness: Harness, name: str, content: str | bytes) -> Path:
    path = harness.workspace / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    await harness.run(ReadTool(), filePath=name)
    return path


async def test_add_update_move_and_delete_in_one_patch(harness: Harness) -> None:
    updated = await read_first(harness, "src/app.py", "def greet():\n    print('Hi')\n")
    moved = await read_first(harness, "old/name.txt", "one\ntwo\n")
    doomed = await read_first(harness, "obsolete.txt", "bye\n")
    result = await apply(
        harness,
        "*** Add File: docs/hello.txt",
        "+Hello",
        "+world",
        "*** Update File: src/app.py",
        "@@ def greet():",
        "-    print('Hi')",
        "+    print('Hello, world!')",
        "*** Update File: old/name.txt",
        "*** Move to: new/name.txt",
        " one",
        "-two",
        "+2",
        "*** Delete File: obsolete.txt",
    )
    assert (harness.workspace / "docs/hello.txt").read_text() == "Hello\nworld\n"
    assert updated.read_text() == "def greet():\n    print('Hello, world!')\n"
    assert not moved.exists()
    assert (harness.workspace / "new/name.txt").read_text() == "one\n2\n"
    assert not doomed.exists()
    assert result.output == (
        "Success. Updated the following files:\n"
        "A docs/hello.txt\nM src/app.py\nM new/name.txt\nD obsolete.txt"
    )
    files = result.metadata["files"]
    assert [(f["relativePath"], f["type"]) for f in files] == [
        ("docs/hello.txt", "add"),
        ("src/app.py", "update"),
        ("new/name.txt", "move"),
        ("obsolete.txt", "delete"),
    ]
    assert files[2]["movePath"] == str(harness.workspace / "new/name.txt")
    assert (files[1]["additions"], files[1]["deletions"]) == (1, 1)
    assert "+    print('Hello, world!')" in result.metadata["diff"]


async def test_one_edit_ask_covers_every_path(harness: Harness) -> None:
    await read_first(harness, "a.txt", "a\n")
    await apply(
        harness,
        "*** Add File: b.txt",
        "+b",
        "*** Update File: a.txt",
        "*** Move to: c.txt",
        "-a",
        "+A",
    )
    [ask] = harness.asked("edit")
    assert ask.patterns == ["b.txt", "a.txt", "c.txt"]
    assert ask.always == ["*"]
    assert [f["relativePath"] for f in ask.metadata["files"]] == ["b.txt", "c.txt"]
    assert "-a\n+A\n" in ask.metadata["diff"] and "+b\n" in ask.metadata["diff"]


async def test_multiple_chunks_in_one_file(harness: Harness) -> None:
    path = await read_first(harness, "m.py", "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n")
    await apply(
        harness,
        "*** Update File: m.py",
        "@@",
        "-a = 1",
        "+a = 10",
        "@@",
        " c = 3",
        "-d = 4",
        "+d = 40",
        "@@",
        "-e = 5",
        "+e = 50",
        "*** End of File",
    )
    assert path.read_text() == "a = 10\nb = 2\nc = 3\nd = 40\ne = 50\n"


async def test_a_failed_hunk_leaves_every_file_untouched(harness: Harness) -> None:
    first = await read_first(harness, "first.txt", "keep\n")
    second = await read_first(harness, "second.txt", "alpha\nbeta\n")
    doomed = await read_first(harness, "doomed.txt", "still here\n")
    with pytest.raises(ToolError) as failure:
        await apply(
            harness,
            "*** Add File: brand-new.txt",
            "+x",
            "*** Update File: first.txt",
            "-keep",
            "+changed",
            "*** Delete File: doomed.txt",
            "*** Update File: second.txt",
            " alpha",
            "-gamma",
            "+delta",
        )
    assert str(failure.value) == (
        "apply_patch verification failed: failed to find the expected lines in second.txt:\nalpha\ngamma"
    )
    assert first.read_text() == "keep\n"
    assert second.read_text() == "alpha\nbeta\n"
    assert doomed.read_text() == "still here\n"
    assert not (harness.workspace / "brand-new.txt").exists()
    assert harness.asked("edit") == []


async def test_context_lines_tolerate_trailing_whitespace_in_the_file(harness: Harness) -> None:
    path = await read_first(harness, "w.txt", "x = 1  \ny = 2\t\n")
    await apply(harness, "*** Update File: w.txt", " x = 1", "-y = 2", "+y = 3")
    assert path.read_text() == "x = 1  \ny = 3\n"


async def test_context_not_found_names_the_file_and_the_missing_context(harness: Harness) -> None:
    await read_first(harness, "c.py", "def f():\n    pass\n")
    expected = "apply_patch verification failed: failed to find context 'def g():' in c.py"
    with pytest.raises(ToolError, match=re.escape(expected)):
        await apply(harness, "*** Update File: c.py", "@@ def g():", "-    pass", "+    return 1")


async def test_crlf_line_endings_and_bom_are_kept(harness: Harness) -> None:
    path = await read_first(harness, "win.txt", "\ufeffone\r\ntwo\r\nthree\r\n".encode())
    await apply(harness, "*** Update File: win.txt", " one", "-two", "+TWO", "+2.5")
    assert path.read_bytes() == "\ufeffone\r\nTWO\r\n2.5\r\nthree\r\n".encode()


async def test_a_moved_file_keeps_its_mode(harness: Harness) -> None:
    path = await read_first(harness, "run.sh", "echo hi\n")
    path.chmod(0o755)
    await harness.run(ReadTool(), filePath="run.sh")
    await apply(harness, "*** Update File: run.sh", "*** Move to: bin/run.sh")
    moved = harness.workspace / "bin/run.sh"
    assert moved.read_text() == "echo hi\n" and os.access(moved, os.X_OK)
    assert not path.exists()


async def test_updating_a_file_needs_a_fresh_read(harness: Harness) -> None:
    path = harness.workspace / "unread.txt"
    path.write_text("a\n")
    with pytest.raises(ToolError, match="verification failed: You must read file"):
        await apply(harness, "*** Update File: unread.txt", "-a", "+b")
    await harness.run(ReadTool(), filePath="unread.txt")
    path.write_text("changed behind our back\n")
    with pytest.raises(ToolError, match="has been modified since it was last read"):
        await apply(harness, "*** Update File: unread.txt", "-a", "+b")
    assert path.read_text() == "changed behind our back\n"


async def test_adding_over_an_existing_file_needs_a_read_first(harness: Harness) -> None:
    path = harness.workspace / "exists.txt"
    path.write_text("old\n")
    with pytest.raises(ToolError, match="You must read file"):
        await apply(harness, "*** Add File: exists.txt", "+new")
    await harness.run(ReadTool(), filePath="exists.txt")
    await apply(harness, "*** Add File: exists.txt", "+new")
    assert path.read_text() == "new\n"


async def test_files_that_are_not_there_or_are_in_the_way(harness: Harness) -> None:
    await read_first(harness, "src.txt", "x\n")
    await read_first(harness, "taken.txt", "y\n")
    (harness.workspace / "dir").mkdir()
    cases = {
        "file not found": ("*** Delete File: ghost.txt",),
        "is a directory": ("*** Update File: dir", "-x", "+y"),
        "the destination exists": ("*** Update File: src.txt", "*** Move to: taken.txt"),
        "is not a directory": ("*** Add File: taken.txt/inner.txt", "+z"),
        "appears in more than one hunk": ("*** Delete File: src.txt", "*** Update File: src.txt", "-x", "+y"),
    }
    for message, lines in cases.items():
        with pytest.raises(ToolError, match=f"apply_patch verification failed: .*{message}"):
            await apply(harness, *lines)
    assert (harness.workspace / "src.txt").read_text() == "x\n"
    assert (harness.workspace / "taken.txt").read_text() == "y\n"


async def test_malformed_and_empty_patches_are_verification_failures(harness: Harness) -> None:
    with pytest.raises(ToolError, match="apply_patch verification failed: the patch is empty"):
        await harness.run(ApplyPatchTool(), patchText="")
    with pytest.raises(ToolError, match="apply_patch verification failed: the patch contains no file"):
        await harness.run(ApplyPatchTool(), patchText=patch())
    with pytest.raises(ToolError, match="verification failed: the first line of the patch must be"):
        await harness.run(ApplyPatchTool(), patchText="*** Add File: a\n+x\n*** End Patch")


async def _refuse_external(request: PermissionRequest) -> None:
    if request.permission == "external_directory":
        raise PermissionDeniedError(f"external_directory denied: {request.patterns}")


@pytest.mark.parametrize("kind", ["relative", "absolute", "symlink", "move"])
async def test_paths_outside_the_workspace_are_refused(harness: Harness, tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("safe\n")
    await read_first(harness, "inside.txt", "in\n")
    (harness.workspace / "link").symlink_to(outside)
    lines = {
        "relative": ("*** Delete File: ../outside/victim.txt",),
        "absolute": ("*** Delete File: " + str(victim),),
        "symlink": ("*** Add File: link/planted.txt", "+gotcha"),
        "move": ("*** Update File: inside.txt", "*** Move to: ../outside/moved.txt"),
    }[kind]
    ctx = dataclasses.replace(harness.context(), ask=_refuse_external)
    with pytest.raises(ToolError):
        await run_tool(ApplyPatchTool(), {"patchText": patch(*lines)}, ctx, limits=harness.limits)
    assert victim.read_text() == "safe\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (harness.workspace / "inside.txt").read_text() == "in\n"


async def test_a_file_changed_while_the_patch_waits_for_approval_leaves_every_file_as_it_was(
    harness: Harness,
) -> None:
    first = await read_first(harness, "a.txt", "a\n")
    second = await read_first(harness, "b.txt", "b\n")
    harness.ask_override = approved_after(lambda: second.write_text("b, theirs\n"))
    with pytest.raises(ToolError, match=f"File {second} was modified while this change waited"):
        await apply(
            harness,
            "*** Update File: a.txt",
            "-a",
            "+A",
            "*** Delete File: b.txt",
            "*** Add File: c.txt",
            "+c",
        )
    assert (first.read_text(), second.read_text()) == ("a\n", "b, theirs\n")
    assert not (harness.workspace / "c.txt").exists()


@pytest.mark.parametrize(
    "hunk", [("*** Add File: new.txt", "+mine"), ("*** Update File: a.txt", "*** Move to: new.txt")]
)
async def test_a_destination_taken_while_the_patch_waits_is_kept(
    harness: Harness, hunk: tuple[str, ...]
) -> None:
    source = await read_first(harness, "a.txt", "a\n")
    taken = harness.workspace / "new.txt"
    harness.ask_override = approved_after(lambda: taken.write_text("theirs\n"))
    with pytest.raises(ToolError, match=f"File {taken} was created while this change waited"):
        await apply(harness, *hunk)
    assert (source.read_text(), taken.read_text()) == ("a\n", "theirs\n")


async def test_two_names_of_one_file_are_one_hunk_too_many(harness: Harness) -> None:
    path = harness.workspace / "a.txt"
    path.write_text("a\n")
    (harness.workspace / "link.txt").symlink_to(path)
    (harness.workspace / "hard.txt").hardlink_to(path)
    for name in ("a.txt", "hard.txt"):
        await harness.run(ReadTool(), filePath=name)
    for other in ("link.txt", "hard.txt"):
        with pytest.raises(ToolError, match="appears in more than one hunk"):
            await apply(
                harness, "*** Update File: a.txt", "-a", "+A", f"*** Update File: {other}", "-a", "+B"
            )
    assert path.read_text() == "a\n"


async def test_a_move_keeps_the_file_mode_and_is_noted_as_read(harness: Harness) -> None:
    script = await read_first(harness, "run.sh", "echo one\n")
    script.chmod(0o750)
    await harness.run(ReadTool(), filePath="run.sh")
    await apply(harness, "*** Update File: run.sh", "*** Move to: bin/go.sh", "-echo one", "+echo two")
    moved = harness.workspace / "bin" / "go.sh"
    assert (moved.read_text(), moved.stat().st_mode & 0o777, script.exists()) == ("echo two\n", 0o750, False)
    await apply(harness, "*** Update File: bin/go.sh", "-echo two", "+echo three")  # read: as written
