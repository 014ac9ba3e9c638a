"""The `glob` tool (KERNEL 7.7): find files by name pattern, newest first."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import Field

from agentforge.tools import pinned
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolResult
from agentforge.tools.globmatch import compile_glob
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_real
from agentforge.tools.walk import walk_files

LIMIT = 100
TRUNCATED_NOTE = "(Results are truncated. Consider using a more specific path or pattern.)"

DESCRIPTION = """Fast file pattern matching that works with any codebase size.

Usage:
- Supports glob patterns like "**/*.js" or "src/**/*.ts". A pattern without a slash matches \
file names at any depth ("*.py").
- Returns absolute paths of matching files, most recently modified first (at most 100).
- path is the directory to search in (defaults to the workspace root). Omit it rather than \
passing "undefined" or "null".
- .git and node_modules are not searched.
- When you are doing an open-ended search that may need several rounds of globbing and grepping, \
do those searches in parallel where you can."""


class GlobParams(ToolParams):
    pattern: str = Field(description="The glob pattern to match files against")
    path: str | None = Field(
        default=None,
        description="The directory to search in (defaults to the workspace root)",
    )


class GlobTool(Tool[GlobParams]):
    id = "glob"
    has_effects = False  # it only reads: no write-ahead needed
    changes_files = False
    description = DESCRIPTION
    parameters = GlobParams

    async def execute(self, args: GlobParams, ctx: ToolContext) -> ToolResult:
        root, real = await guard_real(ctx, args.path or ".", kind="directory")
        await ctx.ask(
            PermissionRequest(
                permission="glob",
                patterns=[args.pattern],
                always=["*"],
                metadata={"pattern": args.pattern, "path": args.path},
            )
        )
        matches, total = await asyncio.to_thread(_find, root, real, args.pattern)
        truncated = total > len(matches)
        if not matches:
            output = "No files found"
        else:
            output = "\n".join(str(path) for path in matches)
            if truncated:
                output += "\n\n" + TRUNCATED_NOTE
        return ToolResult(
            title=display_path(ctx, root),
            output=output,
            metadata={"count": len(matches), "truncated": truncated},
        )


def _find(root: Path, real: Path, pattern: str) -> tuple[list[Path], int]:
    """`find_files` under `root`, which must be a directory, walked from where its check saw it lead
    (tools/pinned.py); in one hop off the loop. Blocking."""
    with pinned.opened_directory(root, real) as directory:
        return find_files(root, real, directory, pattern, LIMIT)


def relative_pattern(root: Path, pattern: str) -> str:
    """Models sometimes put the absolute search root into the pattern; make it relative again."""
    prefix = root.as_posix().rstrip("/") + "/"
    return pattern[len(prefix) :] if pattern.startswith(prefix) else pattern


def find_files(root: Path, real: Path, directory: int, pattern: str, limit: int) -> tuple[list[Path], int]:
    """The `limit` most recently modified matches under the directory open as `directory` (`root`
    as named), and how many matched in total."""
    regex = compile_glob(relative_pattern(root, pattern))
    found: list[tuple[float, Path]] = []
    for walked in walk_files(root, real, directory):
        if regex.match(walked.relative):
            try:
                mtime = os.stat(walked.name, dir_fd=walked.directory).st_mtime
            except OSError:
                continue  # vanished or a dangling symlink
            found.append((mtime, walked.path))
    found.sort(key=lambda item: (-item[0], str(item[1])))
    return [path for _, path in found[:limit]], len(found)
