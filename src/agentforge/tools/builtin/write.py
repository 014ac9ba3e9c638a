"""The `write` tool (KERNEL 7.7): create or overwrite a whole file."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from agentforge.tools import filetime, pinned
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolResult
from agentforge.tools.diff import unified_diff
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_real

DESCRIPTION = """Writes a file to the local filesystem.

Usage:
- This tool will overwrite the existing file if there is one at the provided path.
- If this is an existing file, you MUST use the read tool first to read the file's contents. \
This tool will fail if you did not read the file first.
- Parent directories are created as needed.
- ALWAYS prefer editing existing files in the codebase with the edit tool. NEVER write new files \
unless explicitly required.
- NEVER proactively create documentation files (*.md) or README files. Only create documentation \
files if explicitly requested by the user."""


class WriteParams(ToolParams):
    content: str = Field(description="The content to write to the file")
    file_path: str = Field(
        alias="filePath",
        description="The path of the file to write (absolute, or relative to the workspace root)",
    )


@dataclass(frozen=True, slots=True)
class _Planned:
    exists: bool
    seen: filetime.Seen | None  # the file as its content was read (None: there was none)
    diff: str


class WriteTool(Tool[WriteParams]):
    id = "write"
    description = DESCRIPTION
    parameters = WriteParams

    async def execute(self, args: WriteParams, ctx: ToolContext) -> ToolResult:
        path, real = await guard_real(ctx, args.file_path, kind="file")
        relative = display_path(ctx, path)
        async with filetime.file_lock(real):
            # The file system's part in two hops off the loop, one each side of the ask; the file
            # opened where the guard saw its path lead (tools/pinned.py).
            planned = await asyncio.to_thread(_plan, path, real, args.content, ctx.session_id)
            await ctx.ask(
                PermissionRequest(
                    permission="edit",
                    patterns=[relative],
                    always=["*"],
                    metadata={"filepath": str(path), "diff": planned.diff},
                )
            )
            written = await asyncio.to_thread(
                filetime.write_if_unchanged, path, real, args.content, planned.seen
            )
            filetime.note_read(ctx.session_id, written)
        return ToolResult(
            title=relative,
            output="Wrote file successfully.",
            # No language server runs here, so no diagnostics (opencode's clients expect the key).
            metadata={
                "filepath": str(path),
                "exists": planned.exists,
                "diff": planned.diff,
                "diagnostics": {},
            },
        )


def _plan(path: Path, real: Path, content: str, session_id: str) -> _Planned:
    """What writing `content` changes, from the file as it is now. Blocking."""
    found = pinned.read_file(path, real)
    if found is None:
        return _Planned(False, None, unified_diff(str(path), "", content))
    data, now = found
    seen = filetime.seen_as(real, now)
    filetime.assert_fresh_as(session_id, path, seen)
    # newline="" as a text read would: the diff shows the file's own line endings.
    before = data.decode("utf-8", errors="replace")
    return _Planned(True, seen, unified_diff(str(path), before, content))
