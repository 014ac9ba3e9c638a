"""The `edit` tool (KERNEL 7.7): replace a string in a file, tolerant of imperfect quoting."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from agentforge.tools import filetime
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.diff import FileDiff, file_diff
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_path
from agentforge.tools.replace import IDENTICAL, replace

DESCRIPTION = """Performs exact string replacements in files.

Usage:
- You must use the read tool at least once in the conversation before editing. This tool will \
error if you attempt an edit without reading the file.
- When editing text from read tool output, preserve the exact indentation (tabs/spaces) as it \
appears AFTER the line number prefix (`<n>: `). Never include any part of the line number prefix \
in oldString or newString.
- ALWAYS prefer editing existing files. NEVER write new files unless explicitly required.
- The edit will FAIL if oldString is not found in the file.
- The edit will FAIL if oldString is found multiple times in the file. Provide a larger string \
with more surrounding context to make it unique, or use replaceAll to change every instance.
- Use replaceAll for replacing and renaming strings across the file.
- An empty oldString creates the file (or replaces its whole content) with newString."""


class EditParams(ToolParams):
    file_path: str = Field(alias="filePath", description="The path of the file to modify")
    old_string: str = Field(alias="oldString", description="The text to replace")
    new_string: str = Field(
        alias="newString",
        description="The text to replace it with (must be different from oldString)",
    )
    replace_all: bool = Field(
        default=False,
        alias="replaceAll",
        description="Replace all occurrences of oldString (default false)",
    )


@dataclass(frozen=True, slots=True)
class _Change:
    before: str  # "\n" line endings, for the diff
    after: str  # "\n" line endings, for the diff
    written: str  # what goes to disk, in the file's own line endings
    seen: filetime.Seen | None  # the file as its content was read (None: there was none)
    diff: FileDiff


class EditTool(Tool[EditParams]):
    id = "edit"
    description = DESCRIPTION
    parameters = EditParams

    async def execute(self, args: EditParams, ctx: ToolContext) -> ToolResult:
        if args.old_string == args.new_string:
            raise ToolError(IDENTICAL)
        path = await guard_path(ctx, args.file_path, kind="file")
        relative = display_path(ctx, path)
        async with filetime.file_lock(path):
            # The file system's part in two hops off the loop, one each side of the ask (a hop
            # costs a tool call ~0.3 ms: bench/README.md, sixteenth round).
            change = await asyncio.to_thread(_plan, args, ctx.session_id, path)
            await ctx.ask(
                PermissionRequest(
                    permission="edit",
                    patterns=[relative],
                    always=["*"],
                    metadata={"filepath": str(path), "diff": change.diff.patch},
                )
            )
            filetime.note_read(ctx.session_id, await asyncio.to_thread(_make, path, change))
        return ToolResult(
            title=relative,
            output="Edit applied successfully.",
            metadata={"diff": change.diff.patch, "filediff": change.diff.wire(), "diagnostics": {}},
        )


def _plan(args: EditParams, session_id: str, path: Path) -> _Change:
    """The change, from the file as it is now. Blocking."""
    exists = path.exists()
    if exists and path.is_dir():
        raise ToolError(f"Path is a directory, not a file: {path}")
    if args.old_string == "":
        return _whole_file(args, session_id, path, exists)
    if not exists:
        raise ToolError(f"File {path} not found")
    filetime.assert_fresh(session_id, path)
    seen = filetime.look(path)
    raw = _read_file(path)
    ending = "\r\n" if "\r\n" in raw else "\n"
    before = _to_lf(raw)
    after = replace(before, _to_lf(args.old_string), _to_lf(args.new_string), replace_all=args.replace_all)
    return _planned(path, before, after, _from_lf(after, ending), seen)


def _whole_file(args: EditParams, session_id: str, path: Path, exists: bool) -> _Change:
    """Empty oldString: create the file, or replace all of an existing file's content."""
    before, seen = "", None
    if exists:
        filetime.assert_fresh(session_id, path)
        seen = filetime.look(path)
        before = _to_lf(_read_file(path))
    return _planned(path, before, _to_lf(args.new_string), args.new_string, seen)


def _planned(path: Path, before: str, after: str, written: str, seen: filetime.Seen | None) -> _Change:
    return _Change(before, after, written, seen, file_diff(str(path), before, after))


def _make(path: Path, change: _Change) -> filetime.Seen:
    """Write the change unless the file changed since it was planned (while the ask waited, say);
    the file as written. Blocking."""
    filetime.assert_unchanged(path, change.seen)
    _write_file(path, change.written)
    return filetime.look(path)


def _to_lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _from_lf(text: str, ending: str) -> str:
    return text if ending == "\n" else text.replace("\n", ending)


def _read_file(path: Path) -> str:
    try:
        # newline="" keeps "\r\n" visible so the file's line endings can be preserved.
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.read()
    except UnicodeDecodeError as error:
        raise ToolError(f"Cannot edit {path}: it is not UTF-8 text ({error.reason}).") from None


def _write_file(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(content)
