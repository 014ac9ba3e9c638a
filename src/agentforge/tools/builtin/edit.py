"""The `edit` tool (KERNEL 7.7): replace a string in a file, tolerant of imperfect quoting."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from agentforge.tools import filetime, pinned
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.diff import FileDiff, file_diff
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_real
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
        path, real = await guard_real(ctx, args.file_path, kind="file")
        relative = display_path(ctx, path)
        async with filetime.file_lock(real):
            # The file system's part in two hops off the loop, one each side of the ask; the file
            # opened where the guard saw its path lead (tools/pinned.py).
            change = await asyncio.to_thread(_plan, path, real, args, ctx.session_id)
            await ctx.ask(
                PermissionRequest(
                    permission="edit",
                    patterns=[relative],
                    always=["*"],
                    metadata={"filepath": str(path), "diff": change.diff.patch},
                )
            )
            written = await asyncio.to_thread(
                filetime.write_if_unchanged, path, real, change.written, change.seen
            )
            filetime.note_read(ctx.session_id, written)
        return ToolResult(
            title=relative,
            output="Edit applied successfully.",
            metadata={"diff": change.diff.patch, "filediff": change.diff.wire(), "diagnostics": {}},
        )


def _plan(path: Path, real: Path, args: EditParams, session_id: str) -> _Change:
    """The change, from the file as it is now. Blocking."""
    found = pinned.read_file(path, real)
    seen = None if found is None else filetime.seen_as(real, found[1])
    if seen is not None:
        filetime.assert_fresh_as(session_id, path, seen)
    if args.old_string == "":  # create the file, or replace all of an existing file's content
        before = "" if found is None else _to_lf(_decoded(path, found[0]))
        return _planned(path, before, _to_lf(args.new_string), args.new_string, seen)
    if found is None:
        raise ToolError(f"File {path} not found")
    raw = _decoded(path, found[0])
    ending = "\r\n" if "\r\n" in raw else "\n"
    before = _to_lf(raw)
    after = replace(before, _to_lf(args.old_string), _to_lf(args.new_string), replace_all=args.replace_all)
    return _planned(path, before, after, _from_lf(after, ending), seen)


def _planned(path: Path, before: str, after: str, written: str, seen: filetime.Seen | None) -> _Change:
    return _Change(before, after, written, seen, file_diff(str(path), before, after))


def _to_lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _from_lf(text: str, ending: str) -> str:
    return text if ending == "\n" else text.replace("\n", ending)


def _decoded(path: Path, data: bytes) -> str:
    """The file's text, its "\r\n" kept so its line endings can be preserved."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(f"Cannot edit {path}: it is not UTF-8 text ({error.reason}).") from None
