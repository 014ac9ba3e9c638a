"""The `list` tool (KERNEL 7.7, [older]): a tree view of a directory, dependency/build dirs left out."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from agentforge.tools import pinned
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolResult
from agentforge.tools.globmatch import glob_matches
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_real

LIMIT = 100
DEFAULT_IGNORES = frozenset(
    {
        "node_modules", "__pycache__", ".git", "dist", "build", "target", "vendor", "bin", "obj",
        ".idea", ".vscode", ".zig-cache", "zig-out", ".coverage", "coverage", "tmp", "temp",
        ".cache", "cache", "logs", ".venv", "venv", "env", ".mypy_cache", ".pytest_cache",
        ".ruff_cache", ".tox", ".next", ".turbo",
    }
)  # fmt: skip
TRUNCATED_NOTE = (
    f"(Showing the first {LIMIT} entries. Use a more specific path or ignore patterns to see more.)"
)

DESCRIPTION = """Lists files and directories as a tree.

Usage:
- path is the directory to list (defaults to the workspace root).
- ignore is an optional list of glob patterns to leave out ("*.log", "fixtures/**").
- Dependency, cache and build directories (node_modules, .git, .venv, dist, build, __pycache__...) \
are left out.
- Shows at most 100 entries, nearest the top first.
- Prefer the glob and grep tools when you know what you are looking for."""


class ListParams(ToolParams):
    path: str | None = Field(
        default=None,
        description="The directory to list (absolute, or relative to the workspace root)",
    )
    ignore: list[str] | None = Field(default=None, description="List of glob patterns to ignore")


@dataclass(slots=True)
class _Node:
    dirs: dict[str, _Node] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


class ListTool(Tool[ListParams]):
    id = "list"
    has_effects = False  # it only reads: no write-ahead needed
    changes_files = False
    description = DESCRIPTION
    parameters = ListParams

    async def execute(self, args: ListParams, ctx: ToolContext) -> ToolResult:
        root, real = await guard_real(ctx, args.path or ".", kind="directory")
        await ctx.ask(PermissionRequest(permission="list", patterns=[str(root)], always=["*"], metadata={}))
        tree, count, truncated = await asyncio.to_thread(_collect, root, real, args.ignore or [])
        output = f"{root}/\n" + render_tree(tree, depth=1)
        if truncated:
            output += "\n" + TRUNCATED_NOTE
        return ToolResult(
            title=display_path(ctx, root),
            output=output,
            metadata={"count": count, "truncated": truncated},
        )


def _collect(root: Path, real: Path, ignore: list[str]) -> tuple[_Node, int, bool]:
    """`collect_tree` of `root`, which must be a directory, walked from where its check saw it lead
    (tools/pinned.py); in one hop off the loop. Blocking."""
    with pinned.opened_directory(root, real) as directory:
        return collect_tree(directory, ignore, LIMIT)


def _ignored(name: str, relative: str, patterns: list[str]) -> bool:
    if name in DEFAULT_IGNORES:
        return True
    return any(glob_matches(p, relative) or glob_matches(p, name) for p in patterns)


def collect_tree(directory: int, ignore: list[str], limit: int) -> tuple[_Node, int, bool]:
    """The tree under the directory open as `directory`, breadth-first, so a big first subdirectory
    cannot hide the rest of the top level. Each subdirectory is entered through its open parent
    and no symlink (one swapped in since it was listed is listed but not entered)."""
    top = _Node()
    queue: deque[tuple[int, str, _Node]] = deque([(os.dup(directory), "", top)])
    try:
        return _collect_into(top, queue, ignore, limit)
    finally:
        for held, _, _ in queue:
            os.close(held)


def _collect_into(
    top: _Node, queue: deque[tuple[int, str, _Node]], ignore: list[str], limit: int
) -> tuple[_Node, int, bool]:
    count = 0
    while queue:
        held, prefix, node = queue.popleft()
        try:
            entries = sorted(os.scandir(held), key=lambda e: e.name)
        except OSError:
            entries = []
        try:
            for entry in entries:
                relative = prefix + entry.name
                if _ignored(entry.name, relative, ignore):
                    continue
                if count >= limit:
                    return top, count, True
                count += 1
                if entry.is_dir(follow_symlinks=False):
                    child = node.dirs.setdefault(entry.name, _Node())
                    inner = _enter(held, entry.name)
                    if inner is not None:
                        queue.append((inner, relative + "/", child))
                else:
                    node.files.append(entry.name)
        finally:
            os.close(held)
    return top, count, False


def _enter(directory: int, name: str) -> int | None:
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except OSError:  # unreadable, or no longer a directory
        return None


def render_tree(node: _Node, depth: int) -> str:
    indent = "  " * depth
    out: list[str] = []
    for name in sorted(node.dirs):
        out.append(f"{indent}{name}/\n")
        out.append(render_tree(node.dirs[name], depth + 1))
    out.extend(f"{indent}{name}\n" for name in sorted(node.files))
    return "".join(out)
