"""The `write` tool (KERNEL 7.7): create or overwrite a whole file."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from agentforge.tools import filetime
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.diff import unified_diff
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_path

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
        path = await guard_path(ctx, args.file_path, kind="file")
        relative = display_path(ctx, path)
        async with filetime.file_lock(path):
            # The file system's part in two hops off the loop, one each side of the ask.
            planned = await asyncio.to_thread(_plan, path, args.content, ctx.session_id)
            await ctx.ask(
                PermissionRequest(
                    permission="edit",
                    patterns=[relative],
                    always=["*"],
                    metadata={"filepath": str(path), "diff": planned.diff},
                )
            )
            filetime.note_read(ctx.session_id, await asyncio.to_thread(_make, path, args.content, planned))
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


def _plan(path: Path, content: str, session_id: str) -> _Planned:
    """What writing `content` changes, from the file as it is now. Blocking."""
    if not path.exists():
        return _Planned(False, None, unified_diff(str(path), "", content))
    if path.is_dir():
        raise ToolError(f"Path is a directory, not a file: {path}")
    filetime.assert_fresh(session_id, path)
    seen = filetime.look(path)
    return _Planned(True, seen, unified_diff(str(path), _read_existing(path), content))


def _make(path: Path, content: str, planned: _Planned) -> filetime.Seen:
    """Write unless the file changed since it was planned (while the ask waited, say); the file as
    written. Blocking."""
    filetime.assert_unchanged(path, planned.seen)
    _write_file(path, content)
    return filetime.look(path)


def _read_existing(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        return handle.read()


def _write_file(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # newline="" writes the content byte for byte: no "\n" -> os.linesep translation.
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(content)
