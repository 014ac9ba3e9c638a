"""The `apply_patch` tool (KERNEL 7.7): add, update, move and delete files with one patch.

Every hunk is checked against the files before any file changes: a patch either applies whole or
leaves the workspace as it was (short of a disk failure mid-way). One `edit` permission ask covers
every path the patch touches.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agentforge.tools import filetime
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.diff import file_diff
from agentforge.tools.params import ToolParams
from agentforge.tools.patch import (
    AddFile,
    DeleteFile,
    Hunk,
    PatchError,
    TextFile,
    UpdateFile,
    apply_update,
    parse_patch,
)
from agentforge.tools.paths import display_path, guard_path

VERIFICATION_FAILED = "apply_patch verification failed: "

DESCRIPTION = """Use the `apply_patch` tool to edit files. Your patch language is a stripped-down, \
file-oriented diff format designed to be easy to parse and safe to apply. You can think of it as a \
high-level envelope:

*** Begin Patch
[ one or more file sections ]
*** End Patch

Within that envelope, you get a sequence of file operations. You MUST include a header to specify \
the action you are taking. Each operation starts with one of three headers:

*** Add File: <path> - create a new file. Every following line is a + line (the initial contents).
*** Delete File: <path> - remove an existing file. Nothing follows.
*** Update File: <path> - patch an existing file in place (optionally with a rename).

May be immediately followed by *** Move to: <new path> if you want to rename the file.
Then one or more "hunks", each introduced by @@ (optionally followed by a hunk header, such as a \
class or function line, that locates the change).
Within a hunk each line starts with:
" " (space) for context, "-" for a removed line, "+" for an added line.

Show 3 lines of context above and below each change. If that is not enough to locate the change \
uniquely, use @@ lines naming the class or function it is in. "*** End of File" after a hunk \
anchors it at the end of the file.

Example:
*** Begin Patch
*** Add File: hello.txt
+Hello world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-print("Hi")
+print("Hello, world!")
*** Delete File: obsolete.txt
*** End Patch

Rules:
- Paths are relative to the workspace root (or absolute inside it).
- You must read a file before updating or overwriting it.
- Every hunk is verified before anything is written: if one fails, no file changes."""

ChangeKind = Literal["add", "update", "move", "delete"]
_LETTERS: dict[ChangeKind, str] = {"add": "A", "update": "M", "move": "M", "delete": "D"}


class ApplyPatchParams(ToolParams):
    patch_text: str = Field(
        alias="patchText", description="The full patch text that describes all changes to be made"
    )


@dataclass(frozen=True, slots=True)
class _Target:
    """A hunk with its paths resolved and guarded."""

    hunk: Hunk
    path: Path
    move_to: Path | None = None


@dataclass(frozen=True, slots=True)
class _Change:
    kind: ChangeKind
    path: Path
    destination: Path  # where the content ends up (== path unless moved)
    before: str  # "\n" line endings, for the diff
    after: str
    written: str | None  # the content to write, in the file's own style; None for a deletion
    seen: filetime.Seen | None  # the file at `path` as it was read (None: there was none)


class ApplyPatchTool(Tool[ApplyPatchParams]):
    id = "apply_patch"
    description = DESCRIPTION
    parameters = ApplyPatchParams

    async def execute(self, args: ApplyPatchParams, ctx: ToolContext) -> ToolResult:
        try:
            hunks = parse_patch(args.patch_text)
        except PatchError as error:
            raise ToolError(VERIFICATION_FAILED + str(error)) from None
        targets = [await _guard(ctx, hunk) for hunk in hunks]
        _refuse_repeated_paths(ctx, targets)
        async with _locked([path for t in targets for path in (t.path, t.move_to) if path is not None]):
            # The file system's part in two hops off the loop, one each side of the ask.
            changes, files = await asyncio.to_thread(_plan, ctx, targets)
            diff = "".join(str(item["diff"]) for item in files)
            await ctx.ask(
                PermissionRequest(
                    permission="edit",
                    patterns=_touched(ctx, changes),
                    always=["*"],
                    metadata={"diff": diff, "files": files},
                )
            )
            for seen in await asyncio.to_thread(_apply_all, changes):
                filetime.note_read(ctx.session_id, seen)
        summary = [f"{_LETTERS[c.kind]} {display_path(ctx, c.destination)}" for c in changes]
        return ToolResult(
            title=", ".join(display_path(ctx, c.destination) for c in changes),
            output="Success. Updated the following files:\n" + "\n".join(summary),
            metadata={"diff": diff, "files": files, "diagnostics": {}},
        )


async def _guard(ctx: ToolContext, hunk: Hunk) -> _Target:
    path = await guard_path(ctx, hunk.path, kind="file")
    if isinstance(hunk, UpdateFile) and hunk.move_to is not None:
        return _Target(hunk, path, await guard_path(ctx, hunk.move_to, kind="file"))
    return _Target(hunk, path)


def _refuse_repeated_paths(ctx: ToolContext, targets: list[_Target]) -> None:
    seen: set[Path] = set()
    for target in targets:
        for path in {target.path, target.move_to or target.path}:
            if path in seen:
                raise ToolError(
                    f"{VERIFICATION_FAILED}{display_path(ctx, path)} appears in more than one hunk; "
                    "put all changes to a file in one Update File section"
                )
            seen.add(path)


@contextlib.asynccontextmanager
async def _locked(paths: list[Path]) -> AsyncIterator[None]:
    """Hold the edit lock of every path, taken in one global order so two patches cannot deadlock."""
    async with contextlib.AsyncExitStack() as stack:
        for path in sorted(set(paths)):
            await stack.enter_async_context(filetime.file_lock(path))
        yield


def _plan(ctx: ToolContext, targets: list[_Target]) -> tuple[list[_Change], list[dict[str, Any]]]:
    """Every hunk checked against its file as it is now, and the entries describing the changes.
    Blocking."""
    try:
        changes = [_verify(ctx, target) for target in targets]
    except (PatchError, ToolError) as error:
        raise ToolError(VERIFICATION_FAILED + str(error)) from None
    return changes, _describe(ctx, changes)


def _verify(ctx: ToolContext, target: _Target) -> _Change:
    hunk = target.hunk
    if isinstance(hunk, AddFile):
        return _verify_add(ctx, target.path, hunk)
    if isinstance(hunk, DeleteFile):
        return _verify_delete(ctx, target.path)
    return _verify_update(ctx, target.path, target.move_to, hunk)


def _verify_add(ctx: ToolContext, path: Path, hunk: AddFile) -> _Change:
    existing, seen = _existing_file(path, must_exist=False)
    if existing is None:
        return _Change("add", path, path, "", hunk.contents, hunk.contents, None)
    # Overwriting a file is only safe when the model has seen what it replaces.
    filetime.assert_fresh(ctx.session_id, path)
    style = TextFile.decode(existing, display_path(ctx, path))
    return _Change("add", path, path, style.text, hunk.contents, style.encode(hunk.contents), seen)


def _verify_delete(ctx: ToolContext, path: Path) -> _Change:
    existing, seen = _existing_file(path, must_exist=True)
    assert existing is not None
    if filetime.last_read(ctx.session_id, path) is not None:
        filetime.assert_fresh(ctx.session_id, path)  # read before: it must not have changed since
    before = existing.decode("utf-8", errors="replace").removeprefix("\ufeff").replace("\r\n", "\n")
    return _Change("delete", path, path, before, "", None, seen)


def _verify_update(ctx: ToolContext, path: Path, move_to: Path | None, hunk: UpdateFile) -> _Change:
    existing, seen = _existing_file(path, must_exist=True)
    assert existing is not None
    filetime.assert_fresh(ctx.session_id, path)
    name = display_path(ctx, path)
    original = TextFile.decode(existing, name)
    updated = apply_update(original.text, hunk.chunks, name)
    destination = path
    if move_to is not None and move_to != path:
        if move_to.exists():
            raise PatchError(f"cannot move {name} to {display_path(ctx, move_to)}: the destination exists")
        _check_can_create(move_to)
        destination = move_to
    kind: ChangeKind = "move" if destination != path else "update"
    return _Change(kind, path, destination, original.text, updated, original.encode(updated), seen)


def _existing_file(path: Path, *, must_exist: bool) -> tuple[bytes | None, filetime.Seen | None]:
    """The file's bytes and the file as they were read; (None, None) when there is none."""
    if path.is_dir():
        raise PatchError(f"{path} is a directory, not a file")
    if path.exists():
        seen = filetime.look(path)  # before reading: a change meanwhile makes it older, never newer
        return path.read_bytes(), seen
    if must_exist:
        raise PatchError(f"file not found: {path}")
    _check_can_create(path)
    return None, None


def _check_can_create(path: Path) -> None:
    """A new file needs its nearest existing ancestor to be a directory (checked now, not mid-apply)."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise PatchError(f"cannot create {path}: {parent} is not a directory")
            return


def _describe(ctx: ToolContext, changes: list[_Change]) -> list[dict[str, Any]]:
    """Per-file entries for the permission prompt and the tool metadata."""
    files: list[dict[str, Any]] = []
    for change in changes:
        relative = display_path(ctx, change.destination)
        diff = file_diff(relative, change.before, change.after)
        entry: dict[str, Any] = {
            "filePath": str(change.path),
            "relativePath": relative,
            "type": change.kind,
            "diff": diff.patch,
            "additions": diff.additions,
            "deletions": diff.deletions,
        }
        if change.kind == "move":
            entry["movePath"] = str(change.destination)
        files.append(entry)
    return files


def _touched(ctx: ToolContext, changes: list[_Change]) -> list[str]:
    paths = [path for c in changes for path in (c.path, c.destination)]
    return list(dict.fromkeys(display_path(ctx, path) for path in paths))


def _apply_all(changes: list[_Change]) -> list[filetime.Seen]:
    """Make every change, unless any file changed since the patch was checked (while the ask
    waited, say): then none. The files written, as written. Blocking."""
    for change in changes:
        filetime.assert_unchanged(change.path, change.seen)
        if change.destination != change.path:
            filetime.assert_unchanged(change.destination, None)  # a move's destination is still free
    for change in changes:
        if change.written is None:
            change.path.unlink()
            continue
        change.destination.parent.mkdir(parents=True, exist_ok=True)
        # newline="" writes the text byte for byte (its line endings are already the file's own).
        with change.destination.open("w", encoding="utf-8", newline="") as handle:
            handle.write(change.written)
        if change.destination != change.path:
            shutil.copymode(change.path, change.destination)
            change.path.unlink()
    return [filetime.look(change.destination) for change in changes if change.written is not None]
