"""The `apply_patch` tool (KERNEL 7.7): add, update, move and delete files with one patch.

Every hunk is checked against the files before any file changes: a patch either applies whole or
leaves the workspace as it was (short of a disk failure mid-way). One `edit` permission ask covers
every path the patch touches.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agentforge.tools import filetime, pinned
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
from agentforge.tools.paths import display_path, guard_real

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
    real: Path  # where the guard saw `path` lead: what is opened (tools/pinned.py)
    move_to: Path | None = None
    move_real: Path | None = None


@dataclass(frozen=True, slots=True)
class _Change:
    kind: ChangeKind
    path: Path
    real: Path
    destination: Path  # where the content ends up (== path unless moved)
    destination_real: Path
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
        async with _locked([real for t in targets for real in (t.real, t.move_real) if real is not None]):
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
    path, real = await guard_real(ctx, hunk.path, kind="file")
    if isinstance(hunk, UpdateFile) and hunk.move_to is not None:
        move_to, move_real = await guard_real(ctx, hunk.move_to, kind="file")
        return _Target(hunk, path, real, move_to, move_real)
    return _Target(hunk, path, real)


def _refuse_repeated_paths(ctx: ToolContext, targets: list[_Target]) -> None:
    """One hunk per file, by where its path leads: two names of one file (a symlink) would take its
    lock twice and lose one hunk's change."""
    seen: set[Path] = set()
    for target in targets:
        places = {target.real: target.path}
        if target.move_to is not None and target.move_real is not None:
            places[target.move_real] = target.move_to
        for real, path in places.items():
            if real in seen:
                raise ToolError(_repeated(ctx, path))
            seen.add(real)


def _repeated(ctx: ToolContext, path: Path) -> str:
    return (
        f"{VERIFICATION_FAILED}{display_path(ctx, path)} appears in more than one hunk; "
        "put all changes to a file in one Update File section"
    )


@contextlib.asynccontextmanager
async def _locked(reals: list[Path]) -> AsyncIterator[None]:
    """Hold the edit lock of every file, taken in one global order so two patches cannot deadlock."""
    async with contextlib.AsyncExitStack() as stack:
        for real in sorted(set(reals)):
            await stack.enter_async_context(filetime.file_lock(real))
        yield


def _plan(ctx: ToolContext, targets: list[_Target]) -> tuple[list[_Change], list[dict[str, Any]]]:
    """Every hunk checked against its file as it is now, and the entries describing the changes.
    Blocking."""
    try:
        changes = [_verify(ctx, target) for target in targets]
    except (PatchError, ToolError) as error:
        raise ToolError(VERIFICATION_FAILED + str(error)) from None
    files: set[tuple[int, int]] = set()
    for change in changes:  # hard links: two names of one file, which no path comparison tells
        if change.seen is not None:
            if change.seen.inode in files:
                raise ToolError(_repeated(ctx, change.path))
            files.add(change.seen.inode)
    return changes, _describe(ctx, changes)


def _verify(ctx: ToolContext, target: _Target) -> _Change:
    hunk = target.hunk
    if isinstance(hunk, AddFile):
        return _verify_add(ctx, target, hunk)
    if isinstance(hunk, DeleteFile):
        return _verify_delete(ctx, target)
    return _verify_update(ctx, target, hunk)


def _verify_add(ctx: ToolContext, target: _Target, hunk: AddFile) -> _Change:
    path, real = target.path, target.real
    existing, seen = _existing_file(path, real, must_exist=False)
    if existing is None or seen is None:
        return _Change("add", path, real, path, real, "", hunk.contents, hunk.contents, None)
    # Overwriting a file is only safe when the model has seen what it replaces.
    filetime.assert_fresh_as(ctx.session_id, path, seen)
    style = TextFile.decode(existing, display_path(ctx, path))
    return _Change(
        "add", path, real, path, real, style.text, hunk.contents, style.encode(hunk.contents), seen
    )


def _verify_delete(ctx: ToolContext, target: _Target) -> _Change:
    path, real = target.path, target.real
    existing, seen = _existing_file(path, real, must_exist=True)
    assert existing is not None and seen is not None
    if filetime.last_read(ctx.session_id, real) is not None:
        filetime.assert_fresh_as(ctx.session_id, path, seen)  # read before: it must not have changed since
    before = existing.decode("utf-8", errors="replace").removeprefix("\ufeff").replace("\r\n", "\n")
    return _Change("delete", path, real, path, real, before, "", None, seen)


def _verify_update(ctx: ToolContext, target: _Target, hunk: UpdateFile) -> _Change:
    path, real = target.path, target.real
    existing, seen = _existing_file(path, real, must_exist=True)
    assert existing is not None and seen is not None
    filetime.assert_fresh_as(ctx.session_id, path, seen)
    name = display_path(ctx, path)
    original = TextFile.decode(existing, name)
    updated = apply_update(original.text, hunk.chunks, name)
    destination, destination_real = path, real
    if target.move_to is not None and target.move_real is not None and target.move_real != real:
        if pinned.lstat(target.move_real) is not None:
            raise PatchError(
                f"cannot move {name} to {display_path(ctx, target.move_to)}: the destination exists"
            )
        _check_can_create(target.move_real)
        destination, destination_real = target.move_to, target.move_real
    kind: ChangeKind = "move" if destination_real != real else "update"
    encoded = original.encode(updated)
    return _Change(kind, path, real, destination, destination_real, original.text, updated, encoded, seen)


def _existing_file(path: Path, real: Path, *, must_exist: bool) -> tuple[bytes | None, filetime.Seen | None]:
    """The file's bytes and the file as they were read; (None, None) when there is none."""
    found = pinned.read_file(path, real)
    if found is not None:
        return found[0], filetime.seen_as(real, found[1])
    if must_exist:
        raise PatchError(f"file not found: {path}")
    _check_can_create(real)
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
    waited, say): then none (each write checks its file again as it opens it, where the guard saw
    its path lead: tools/pinned.py). The files written, as written. Blocking."""
    for change in changes:
        filetime.assert_unchanged(change.path, change.real, change.seen)
        if change.kind == "move":  # its destination is still free
            filetime.assert_unchanged(change.destination, change.destination_real, None)
    return [seen for change in changes if (seen := _apply(change)) is not None]


def _apply(change: _Change) -> filetime.Seen | None:
    if change.written is None:
        pinned.unlink(change.real)
        return None
    if change.kind != "move":
        return filetime.write_if_unchanged(change.path, change.real, change.written, change.seen)
    assert change.seen is not None  # a moved file was read
    written = filetime.write_if_unchanged(
        change.destination, change.destination_real, change.written, None, mode=change.seen.mode
    )
    pinned.unlink(change.real)
    return written
