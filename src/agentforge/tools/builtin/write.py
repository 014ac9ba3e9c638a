"""The `write` tool (KERNEL 7.7): create or overwrite a whole file."""

from __future__ import annotations

import asyncio
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


class WriteTool(Tool[WriteParams]):
    id = "write"
    description = DESCRIPTION
    parameters = WriteParams

    async def execute(self, args: WriteParams, ctx: ToolContext) -> ToolResult:
        path = await guard_path(ctx, args.file_path, kind="file")
        relative = display_path(ctx, path)
        async with filetime.file_lock(path):
            exists = await asyncio.to_thread(path.exists)
            before = ""
            if exists:
                if await asyncio.to_thread(path.is_dir):
                    raise ToolError(f"Path is a directory, not a file: {path}")
                filetime.assert_fresh(ctx.session_id, path)
                before = await asyncio.to_thread(_read_existing, path)
            diff = await asyncio.to_thread(unified_diff, str(path), before, args.content)
            await ctx.ask(
                PermissionRequest(
                    permission="edit",
                    patterns=[relative],
                    always=["*"],
                    metadata={"filepath": str(path), "diff": diff},
                )
            )
            await asyncio.to_thread(_write_file, path, args.content)
            filetime.record_read(ctx.session_id, path)
        return ToolResult(
            title=relative,
            output="Wrote file successfully.",
            # No language server runs here, so no diagnostics (opencode's clients expect the key).
            metadata={"filepath": str(path), "exists": exists, "diff": diff, "diagnostics": {}},
        )


def _read_existing(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        return handle.read()


def _write_file(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # newline="" writes the content byte for byte: no "\n" -> os.linesep translation.
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(content)
