"""Listing a workspace directory and reading one file, as opencode's `/file` and `/file/content`
answer them."""

from __future__ import annotations

import base64
import mimetypes
import os
from pathlib import Path
from typing import Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.workspace.access import OutsideWorkspaceError, WorkspaceAccess
from agentforge.workspace.git import GitView

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


def list_directory(access: WorkspaceAccess, raw: str) -> list[FileNode]:
    """The entries of the directory `raw` names: directories first, then files, each by name. Entries
    that are not the tenant's are left out; `ignored` says whether git ignores them. Blocking."""
    directory = access.resolve(raw or ".")
    if not directory.is_dir():
        raise OutsideWorkspaceError(f"{access.relative(directory) or '.'} is not a directory")
    entries: list[FileNode] = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.name in HIDDEN_NAMES:
                continue
            path = directory / entry.name
            if access.is_excluded(path.resolve()):
                continue
            kind: Literal["file", "directory"] = "directory" if entry.is_dir() else "file"
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
    ignored = GitView.open(access).ignored([node.path.rstrip("/") for node in entries])
    for node in entries:
        node.ignored = node.path.rstrip("/") in ignored
    entries.sort(key=lambda node: (node.type != "directory", node.name))
    return entries


def read_file(access: WorkspaceAccess, raw: str) -> FileContent:
    """The file's content: text as is (with its diff against git HEAD when it changed), binary files
    base64 encoded with their MIME type. Blocking."""
    path = access.resolve(raw)
    if not path.is_file():
        raise FileNotFoundError(f"File not found: {access.relative(path) or raw}")
    size = path.stat().st_size
    if size > MAX_CONTENT_BYTES:
        raise FileTooLargeError(
            f"{access.relative(path)} is {size} bytes; files over {MAX_CONTENT_BYTES} bytes are not served"
        )
    data = _read_no_follow(path.resolve())
    if _is_binary(data):
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        encoded = base64.b64encode(data).decode("ascii")
        return FileContent(type="binary", content=encoded, encoding="base64", mime_type=mime)
    text = data.decode("utf-8", errors="replace")
    diff = GitView.open(access).diff_against_head(access.relative(path), text)
    return FileContent(type="text", content=text, diff=diff)


def _read_no_follow(real: Path) -> bytes:
    """Read the file at its real path without following a symlink swapped in since it was checked."""
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_CONTENT_BYTES + 1)


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
