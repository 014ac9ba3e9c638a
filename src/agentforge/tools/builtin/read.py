"""The `read` tool (KERNEL 7.7): numbered file lines, directory entries, images and PDFs."""

from __future__ import annotations

import asyncio
import base64
import difflib
import io
import mimetypes
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pydantic import Field

from agentforge.tools import filetime, pinned
from agentforge.tools.base import Attachment, PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import display_path, guard_real

DEFAULT_READ_LIMIT = 2000
MAX_LINE_LENGTH = 2000
MAX_LINE_SUFFIX = f"... (line truncated to {MAX_LINE_LENGTH} chars)"
MAX_BYTES = 50 * 1024
MAX_BYTES_LABEL = f"{MAX_BYTES // 1024} KB"
PREVIEW_LINES = 20
BINARY_SAMPLE = 4096
NON_PRINTABLE_RATIO = 0.3
MAX_SUGGESTIONS = 3

BINARY_EXTENSIONS = frozenset(
    {
        ".zip", ".tar", ".gz", ".exe", ".dll", ".so", ".class", ".jar", ".war", ".7z",
        ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp",
        ".bin", ".dat", ".obj", ".o", ".a", ".lib", ".wasm", ".pyc", ".pyo",
    }
)  # fmt: skip

DESCRIPTION = """Reads a file or directory from the local filesystem.

Usage:
- filePath should be an absolute path or a path relative to the workspace root.
- By default, it returns up to 2000 lines from the start of the file. Use offset (1-based line \
number) and limit to read a specific part of a long file.
- Lines are returned as `<line number>: <content>`. Lines longer than 2000 characters are truncated.
- Output is capped at 50 KB; the footer tells you which offset to continue from.
- A directory path returns its entries, one per line, with a trailing / on subdirectories.
- Images (PNG, JPEG, GIF, WebP...) and PDFs are returned as attachments you can see.
- Binary files cannot be read.
- Reading several files you may need at once is better than reading them one by one.
- You must read a file before editing or overwriting it."""


class ReadParams(ToolParams):
    file_path: str = Field(alias="filePath", description="The path of the file or directory to read")
    offset: int | None = Field(
        default=None, ge=1, description="The line number to start reading from (1-based)"
    )
    limit: int | None = Field(
        default=None, ge=1, description="The maximum number of lines to read (defaults to 2000)"
    )


@dataclass(slots=True)
class _Window:
    lines: list[str]
    total_lines: int
    more_lines: bool
    capped_by_bytes: bool


class ReadTool(Tool[ReadParams]):
    id = "read"
    has_effects = False  # it only reads: no write-ahead needed
    changes_files = False
    description = DESCRIPTION
    parameters = ReadParams

    async def execute(self, args: ReadParams, ctx: ToolContext) -> ToolResult:
        path, real = await readable(ctx, args.file_path)
        title = display_path(ctx, path)
        offset = args.offset or 1
        limit = args.limit or DEFAULT_READ_LIMIT
        # Everything the file system answers in one hop off the loop (a hop costs a tool turn
        # ~0.3 ms of waiting for a thread and the loop again: bench/README.md, sixteenth round),
        # the file opened where the guard saw its path lead (tools/pinned.py).
        result, seen = await asyncio.to_thread(_read, path, real, title, offset, limit)
        if seen is not None:
            filetime.note_read(ctx.session_id, seen)
        return result


def _read(
    path: Path, real: Path, title: str, offset: int, limit: int
) -> tuple[ToolResult, filetime.Seen | None]:
    """The file's lines, the directory's entries or the image or PDF, with the file as the read
    found it (what edit and write compare with later; None for a directory). Blocking."""
    try:
        with pinned.opened(real) as (fd, now):
            if stat.S_ISDIR(now.st_mode):
                return _read_directory(path, fd, title, offset, limit), None
            if not stat.S_ISREG(now.st_mode):
                raise ToolError(f"Cannot read {path}: it is not a regular file")
            # As the open file was before its first byte was read: a change made while it is read
            # makes the record older than what was read (an edit then waits for a new read).
            seen = filetime.seen_as(real, now)
            with open(fd, "rb", closefd=False) as handle:
                media = _media_type(path)
                if media is not None:
                    return _read_attachment(path, handle.read(), title, media), seen
                return _read_text(path, handle, title, offset, limit), seen
    except (FileNotFoundError, NotADirectoryError):  # nothing there, or a file on the way
        raise ToolError(_not_found_message(path, real)) from None


async def readable(ctx: ToolContext, raw: str | Path) -> tuple[Path, Path]:
    """`raw` as an absolute path and the real location checked for it (what to open: tools/pinned.py),
    once the context's confinement and the `read` permission let it be read: what this tool checks
    before it opens anything, and what a file a user attaches goes through too."""
    path, real = await guard_real(ctx, raw)
    await ctx.ask(PermissionRequest(permission="read", patterns=[str(path)], always=["*"]))
    return path, real


def _not_found_message(path: Path, real: Path) -> str:
    message = f"File not found: {path}"
    suggestions = _similar_siblings(path, real)
    if suggestions:
        message += "\n\nDid you mean one of these?\n" + "\n".join(str(p) for p in suggestions)
    return message


def _similar_siblings(path: Path, real: Path) -> list[Path]:
    try:
        with pinned.opened(real.parent) as (directory, _):
            names = sorted(os.listdir(directory))
    except (OSError, ToolError, ValueError):
        return []
    wanted = path.name.lower()
    chosen = [n for n in names if wanted in n.lower() or (n.lower() in wanted and n)]
    close = difflib.get_close_matches(path.name, names, n=MAX_SUGGESTIONS, cutoff=0.6)
    unique = list(dict.fromkeys(chosen + close))
    return [path.parent / name for name in unique[:MAX_SUGGESTIONS]]


def _read_directory(path: Path, directory: int, title: str, offset: int, limit: int) -> ToolResult:
    entries = _directory_entries(directory)
    shown = entries[offset - 1 : offset - 1 + limit]
    truncated = offset - 1 + len(shown) < len(entries)
    if truncated:
        footer = (
            f"(Showing {len(shown)} of {len(entries)} entries. "
            f"Use 'offset' parameter to read beyond entry {offset + len(shown) - 1})"
        )
    else:
        footer = f"({len(entries)} entries)"
    output = "\n".join(
        [f"<path>{path}</path>", "<type>directory</type>", "<entries>", *shown, "", footer, "</entries>"]
    )
    metadata = {"preview": "\n".join(shown[:PREVIEW_LINES]), "truncated": truncated, "loaded": []}
    return ToolResult(title=title, output=output, metadata=metadata)


def _directory_entries(directory: int) -> list[str]:
    entries: list[str] = []
    with os.scandir(directory) as scan:
        for entry in scan:
            try:
                is_dir = entry.is_dir()  # follows symlinks: a link to a directory lists as one
            except OSError:
                is_dir = False
            entries.append(entry.name + "/" if is_dir else entry.name)
    return sorted(entries, key=lambda name: (name.lower(), name))


def _media_type(path: Path) -> str | None:
    """The MIME type when the file is an image or a PDF the model can look at."""
    mime, _ = mimetypes.guess_type(path.name)
    if mime == "application/pdf":
        return mime
    if mime and mime.startswith("image/") and mime != "image/svg+xml":
        return mime
    return None


def _read_attachment(path: Path, data: bytes, title: str, mime: str) -> ToolResult:
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    message = "PDF read successfully" if mime == "application/pdf" else "Image read successfully"
    return ToolResult(
        title=title,
        output=message,
        metadata={"preview": message, "truncated": False, "loaded": []},
        attachments=[Attachment(mime=mime, url=url, filename=path.name)],
    )


def _looks_binary(path: Path, handle: BinaryIO) -> bool:
    if path.suffix.lower() in BINARY_EXTENSIONS:
        return True
    sample = handle.read(BINARY_SAMPLE)
    handle.seek(0)
    if not sample:
        return False
    if b"\0" in sample:
        return True
    non_printable = sum(1 for byte in sample if byte < 9 or 13 < byte < 32)
    return non_printable / len(sample) > NON_PRINTABLE_RATIO


def _read_text(path: Path, handle: BinaryIO, title: str, offset: int, limit: int) -> ToolResult:
    if _looks_binary(path, handle):
        raise ToolError(f"Cannot read binary file: {path}")
    window = _read_window(handle, offset, limit)
    if window.total_lines < offset and not (window.total_lines == 0 and offset == 1):
        raise ToolError(f"Offset {offset} is out of range for this file ({window.total_lines} lines)")
    numbered = [f"{offset + index}: {line}" for index, line in enumerate(window.lines)]
    output = "\n".join([f"<path>{path}</path>", "<type>file</type>", "<content>", *numbered])
    output += "\n\n" + _footer(window, offset) + "\n</content>"
    metadata = {
        "preview": "\n".join(window.lines[:PREVIEW_LINES]),
        "truncated": window.more_lines or window.capped_by_bytes,
        "loaded": [],
    }
    return ToolResult(title=title, output=output, metadata=metadata)


def _footer(window: _Window, offset: int) -> str:
    last = offset + len(window.lines) - 1
    if window.capped_by_bytes:
        return (
            f"(Output capped at {MAX_BYTES_LABEL}. Showing lines {offset}-{last}. "
            f"Use offset={last + 1} to continue.)"
        )
    if window.more_lines:
        return f"(Showing lines {offset}-{last} of {window.total_lines}. Use offset={last + 1} to continue.)"
    return f"(End of file - total {window.total_lines} lines)"


def _read_window(handle: BinaryIO, offset: int, limit: int) -> _Window:
    """Stream the file line by line: only the requested window is kept in memory."""
    text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace")
    try:
        return _window_of(text, offset, limit)
    finally:
        text.detach()  # the file is the caller's to close


def _window_of(lines: Iterable[str], offset: int, limit: int) -> _Window:
    kept: list[str] = []
    kept_bytes = 0
    total = 0
    more_lines = False
    for raw in lines:
        total += 1
        if total < offset:
            continue
        if len(kept) >= limit:
            more_lines = True  # keep counting so the footer can give the total
            continue
        line = raw[:-1] if raw.endswith("\n") else raw
        if len(line) > MAX_LINE_LENGTH:
            line = line[:MAX_LINE_LENGTH] + MAX_LINE_SUFFIX
        size = len(line.encode("utf-8")) + (1 if kept else 0)
        if kept_bytes + size > MAX_BYTES:
            return _Window(kept, total, more_lines=True, capped_by_bytes=True)
        kept.append(line)
        kept_bytes += size
    return _Window(kept, total, more_lines=more_lines, capped_by_bytes=False)
