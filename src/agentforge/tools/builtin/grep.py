"""The `grep` tool (KERNEL 7.7): regex search over file contents.

ripgrep does the search when it is installed; otherwise a Python walk does the same job in a
worker thread. Either way matches are grouped by file, most recently modified file first.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import shutil
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from agentforge.tools import pinned
from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.globmatch import compile_glob
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_real
from agentforge.tools.walk import ALWAYS_SKIPPED_DIRS, walk_files

LIMIT = 100
MAX_LINE_LENGTH = 2000
BINARY_SAMPLE = 8192
TRUNCATED_NOTE = "(Results truncated. Consider using a more specific path or pattern.)"
SKIPPED_NOTE = "(Some paths were inaccessible and skipped)"

DESCRIPTION = """Fast content search tool that works with any codebase size.

Usage:
- Searches file contents with a regular expression ("log.*Error", "function\\s+\\w+").
- Filter files with include (a glob such as "*.js" or "*.{ts,tsx}").
- path is the file or directory to search (defaults to the workspace root).
- Returns matching lines with their line numbers, grouped by file, most recently modified files \
first (at most 100 matches).
- Use this tool instead of running grep or rg through bash.
- To count matches or search in other ways, use bash with rg directly."""


class GrepParams(ToolParams):
    pattern: str = Field(description="The regex pattern to search for in file contents")
    path: str | None = Field(
        default=None,
        description="The file or directory to search in (defaults to the workspace root)",
    )
    include: str | None = Field(
        default=None,
        description='File pattern to include in the search (e.g. "*.js", "*.{ts,tsx}")',
    )


# Where a process finds its open files by number (Linux): how ripgrep is handed the open directory.
_PROC_FDS = Path("/proc/self/fd")


@dataclass(frozen=True, slots=True)
class Match:
    path: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    matches: list[Match]
    skipped_paths: bool = False


class GrepTool(Tool[GrepParams]):
    id = "grep"
    has_effects = False  # it only reads: no write-ahead needed
    changes_files = False
    description = DESCRIPTION
    parameters = GrepParams

    def __init__(self, ripgrep: str | Literal["auto"] | None = "auto") -> None:
        """`ripgrep` is the rg executable, None for the Python search, "auto" to look on PATH. Without
        /proc (ripgrep is handed the open directory through it) the Python search it is."""
        found = find_ripgrep() if ripgrep == "auto" else ripgrep
        self._ripgrep = found if _PROC_FDS.is_dir() else None

    async def execute(self, args: GrepParams, ctx: ToolContext) -> ToolResult:
        target, real = await guard_real(ctx, args.path or ".")
        await ctx.ask(
            PermissionRequest(
                permission="grep",
                patterns=[args.pattern],
                always=["*"],
                metadata={"pattern": args.pattern, "path": args.path, "include": args.include},
            )
        )
        # Searched where the check saw the path lead, whatever symlink was put in it since
        # (tools/pinned.py): the Python search walks from the open directory through no symlink.
        # ripgrep is given the open directory too, but walks below it by path (a part swapped for a
        # symlink meanwhile could be followed): not for a confined tenant, whose commands could race
        # it into another tenant's files.
        if self._ripgrep and ctx.confinement.boundary is None:
            result = await _search_with_ripgrep(self._ripgrep, args.pattern, target, real, args.include)
        else:
            result = await asyncio.to_thread(_search_in_python, args.pattern, target, real, args.include)
        ordered = await asyncio.to_thread(_newest_files_first, result.matches)
        shown = ordered[:LIMIT]
        truncated = len(ordered) > LIMIT
        return ToolResult(
            title=args.pattern,
            output=_format(shown, truncated, result.skipped_paths),
            # Not `truncated`: that key would exempt the output from the byte cap, and 100 long
            # matching lines can exceed it. The session's truncation still applies on top.
            metadata={"matches": len(shown), "limitReached": truncated, "path": display_path(ctx, target)},
        )


def find_ripgrep() -> str | None:
    """rg on PATH, else the one the `ripgrep` wheel put beside this interpreter (an unactivated venv)."""
    beside_python = Path(sys.executable).parent / "rg"
    return shutil.which("rg") or (str(beside_python) if beside_python.is_file() else None)


async def _search_with_ripgrep(
    rg: str, pattern: str, target: Path, real: Path, include: str | None
) -> SearchResult:
    async with _held(target, real) as held:
        # ripgrep searches the open file or directory itself (its /proc/self/fd link leads to it,
        # not to wherever the path leads now); its paths are shown under the path as named.
        opened = f"{_PROC_FDS}/{held}"
        argv = [rg, "--no-config", "-nH", "--hidden", "--no-messages", "--null", "--color=never"]
        for skipped in sorted(ALWAYS_SKIPPED_DIRS):
            argv += ["--glob", f"!{skipped}"]
        if include:
            argv += ["--glob", include]
        argv += ["--regexp", pattern, "--", opened]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(held,),
        )
        stdout, stderr = await proc.communicate()
    # Exit 1 means no match; 2 means an error, possibly after some matches (unreadable files).
    matches = [_shown_under(match, opened, target) for match in _parse_ripgrep(stdout)]
    if proc.returncode == 2 and not matches:
        message = stderr.decode("utf-8", errors="replace").strip()
        raise ToolError(f"ripgrep failed: {message or 'exit status 2'}")
    return SearchResult(matches, skipped_paths=proc.returncode == 2)


def _parse_ripgrep(stdout: bytes) -> Iterator[Match]:
    # With --null each line is `<path>\0<line number>:<text>`: no ambiguity for paths with colons.
    for raw in stdout.split(b"\n"):
        path, sep, rest = raw.partition(b"\0")
        number, colon, text = rest.partition(b":")
        if not sep or not colon or not number.isdigit():
            continue
        yield Match(
            path=path.decode("utf-8", errors="replace"),
            line=int(number),
            text=text.decode("utf-8", errors="replace").rstrip("\r"),
        )


@contextlib.asynccontextmanager
async def _held(target: Path, real: Path) -> AsyncIterator[int]:
    """The file or directory to search, open where its check saw it lead (closed even when the call
    is cancelled while it opens)."""
    opening = asyncio.ensure_future(asyncio.to_thread(pinned.open_to_search, target, real))
    try:
        held = await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_opened)
        raise
    try:
        yield held
    finally:
        os.close(held)


def _close_opened(opening: asyncio.Future[int]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        os.close(opening.result())


def _shown_under(match: Match, opened: str, target: Path) -> Match:
    if match.path == opened:
        return Match(path=str(target), line=match.line, text=match.text)
    inside = match.path.removeprefix(opened + "/")
    shown = str(target / inside) if inside != match.path else match.path
    return Match(path=shown, line=match.line, text=match.text)


def _search_in_python(pattern: str, target: Path, real: Path, include: str | None) -> SearchResult:
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise ToolError(f"Invalid regex pattern {pattern!r}: {error}") from None
    held = pinned.open_to_search(target, real)
    try:
        if stat.S_ISDIR(os.fstat(held).st_mode):
            return _search_tree(regex, target, real, held, include)
        if include is not None and not compile_glob(include).match(target.name):
            return SearchResult([])
        return SearchResult(_search_file(regex, held, target))
    finally:
        os.close(held)


def _search_tree(
    regex: re.Pattern[str], target: Path, real: Path, directory: int, include: str | None
) -> SearchResult:
    include_regex = compile_glob(include) if include else None
    matches: list[Match] = []
    skipped = False
    for walked in walk_files(target, real, directory):
        if include_regex is not None and not include_regex.match(walked.relative):
            continue
        try:
            # Through no symlink: a symlinked file is skipped, as ripgrep skips it.
            flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
            held = os.open(walked.name, flags, dir_fd=walked.directory)
        except OSError:
            skipped = skipped or not pinned.is_symlink(walked.directory, walked.name)
            continue
        try:
            matches.extend(_search_file(regex, held, walked.path))
        except OSError:
            skipped = True
        finally:
            os.close(held)
    return SearchResult(matches, skipped_paths=skipped)


def _search_file(regex: re.Pattern[str], held: int, path: Path) -> list[Match]:
    if not stat.S_ISREG(os.fstat(held).st_mode):
        return []  # a FIFO or a device: nothing ripgrep would search either
    with open(held, "rb", closefd=False) as handle:
        if b"\0" in handle.read(BINARY_SAMPLE):
            return []  # binary, as ripgrep skips it
        handle.seek(0)
        text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace")
        try:
            return [
                Match(path=str(path), line=number, text=stripped)
                for number, line in enumerate(text, start=1)
                if regex.search(stripped := line.rstrip("\n").rstrip("\r"))
            ]
        finally:
            text.detach()


def _newest_files_first(matches: list[Match]) -> list[Match]:
    mtimes: dict[str, float] = {}
    for match in matches:
        if match.path not in mtimes:
            try:
                mtimes[match.path] = os.stat(match.path).st_mtime
            except OSError:
                mtimes[match.path] = 0.0
    return sorted(matches, key=lambda m: (-mtimes[m.path], m.path, m.line))


def _format(matches: list[Match], truncated: bool, skipped_paths: bool) -> str:
    if not matches:
        return "No files found"
    header = f"Found {len(matches)} matches" + (" (more matches available)" if truncated else "")
    lines = [header]
    current = None
    for match in matches:
        if match.path != current:
            if current is not None:
                lines.append("")
            current = match.path
            lines.append(f"{match.path}:")
        text = match.text
        if len(text) > MAX_LINE_LENGTH:
            text = text[:MAX_LINE_LENGTH] + "..."
        lines.append(f"  Line {match.line}: {text}")
    if truncated:
        lines += ["", TRUNCATED_NOTE]
    if skipped_paths:
        lines += ["", SKIPPED_NOTE]
    return "\n".join(lines)
