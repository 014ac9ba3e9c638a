"""Listing a workspace directory and reading one file, as opencode's `/file` and `/file/content`
answer them (the file system in a worker thread, the git state as `git_view` reads it)."""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import os
import stat
from pathlib import Path
from typing import Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.tools import pinned
from agentforge.tools.base import ToolError
from agentforge.tools.pinned import PathMovedError
from agentforge.workspace.access import OutsideWorkspaceError, WorkspaceAccess, leads_to
from agentforge.workspace.git_reader import git_view

# Never listed: the version-control directory and macOS's folder metadata (as opencode does).
HIDDEN_NAMES = frozenset({".git", ".DS_Store"})
# A file larger than this is not sent whole over HTTP: the client gets a 413 naming the limit.
MAX_CONTENT_BYTES = 10 * 1024 * 1024
BINARY_SAMPLE = 8192


class FileTooLargeError(Exception):
    pass


class FileNode(Wire):
    name: str
    path: str = Field(description="Relative to the workspace root")
    absolute: str
    type: Literal["file", "directory"]
    ignored: bool


class FileContent(Wire):
    type: Literal["text", "binary"]
    content: str
    diff: str | None = Field(default=None, description="Unified diff against the git HEAD, when changed")
    encoding: Literal["base64"] | None = None
    mime_type: str | None = Field(default=None, alias="mimeType")


async def list_directory(access: WorkspaceAccess, raw: str) -> list[FileNode]:
    """The entries of the directory `raw` names: directories first, then files, each by name. Entries
    that are not the tenant's are left out; `ignored` says whether git ignores them."""
    entries = await asyncio.to_thread(_listing, access, raw)
    ignored = await (await git_view(access)).ignored([node.path.rstrip("/") for node in entries])
    for node in entries:
        node.ignored = node.path.rstrip("/") in ignored
    entries.sort(key=lambda node: (node.type != "directory", node.name))
    return entries


def _listing(access: WorkspaceAccess, raw: str) -> list[FileNode]:
    directory, real = access.locate(raw or ".")
    try:
        with pinned.opened_directory(directory, real) as held:
            return _entries(access, directory, real, held)
    except ToolError:  # not a directory, or a part of its path swapped for a symlink since the check
        raise OutsideWorkspaceError(f"{access.relative(directory) or '.'} is not a directory") from None


def _entries(access: WorkspaceAccess, directory: Path, real: Path, held: int) -> list[FileNode]:
    """The entries of the directory open as `held` (where the check saw `directory` lead)."""
    entries: list[FileNode] = []
    with os.scandir(held) as scan:
        for entry in scan:
            target = leads_to(real / entry.name)  # None: a symlink loop, listed as a file
            if entry.name in HIDDEN_NAMES or (target is not None and access.is_excluded(target)):
                continue
            path = directory / entry.name
            # A symlink is looked through only into the workspace: what lies outside stays unknown.
            inside = target is not None and target.is_relative_to(access.real_root)
            kind: Literal["file", "directory"] = (
                "directory" if entry.is_dir(follow_symlinks=inside) else "file"
            )
            entries.append(
                FileNode(
                    name=entry.name,
                    # Directories end in "/", as opencode's clients expect.
                    path=access.relative(path) + ("/" if kind == "directory" else ""),
                    absolute=str(path),
                    type=kind,
                    ignored=False,
                )
            )
    return entries


async def read_file(access: WorkspaceAccess, raw: str) -> FileContent:
    """The file's content: text as is (with its diff against git HEAD when it changed), binary files
    base64 encoded with their MIME type."""
    path, data = await asyncio.to_thread(_located_bytes, access, raw)
    if _is_binary(data):
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        encoded = base64.b64encode(data).decode("ascii")
        return FileContent(type="binary", content=encoded, encoding="base64", mime_type=mime)
    text = data.decode("utf-8", errors="replace")
    diff = await (await git_view(access)).diff_against_head(access.relative(path), text)
    return FileContent(type="text", content=text, diff=diff)


def _located_bytes(access: WorkspaceAccess, raw: str) -> tuple[Path, bytes]:
    path, real = access.locate(raw)
    return path, _read(access, path, real)


def _read(access: WorkspaceAccess, path: Path, real: Path) -> bytes:
    """The file's bytes, read where the check saw its path lead: a part of the path swapped for a
    symlink since (by a command the tenant runs beside the request) is refused, never followed."""
    shown = access.relative(path) or str(path)
    try:
        with pinned.opened(real) as (held, found):
            if not stat.S_ISREG(found.st_mode):
                raise FileNotFoundError(f"File not found: {shown}")
            if found.st_size > MAX_CONTENT_BYTES:
                raise FileTooLargeError(
                    f"{shown} is {found.st_size} bytes; files over {MAX_CONTENT_BYTES} bytes are not served"
                )
            with open(held, "rb", closefd=False) as handle:
                return handle.read(MAX_CONTENT_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"File not found: {shown}") from None
    except PathMovedError:
        reason = f"Refusing to access {path}: its path changed while it was read."
        raise OutsideWorkspaceError(reason) from None


def _is_binary(data: bytes) -> bool:
    sample = data[:BINARY_SAMPLE]
    if b"\0" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the sample's end is still text.
        return exc.start < len(sample) - 3
    return False
