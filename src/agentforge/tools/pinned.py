"""Files opened exactly where their path's guard saw it lead (tools/paths.py `guard_real`).

The guard checks a path's real location (symlinks followed) against the workspace, the tenant's
boundary and the fence; a file tool then opens it in a hop to a thread, a moment later, or minutes
later when a person must approve the call first. A symlink put in the path meanwhile (by a command
the tenant runs beside the call, say) would lead the server's own open, which no sandbox confines,
where the guard never looked: outside the workspace, into another tenant's files. So the file tools
open the real path the guard checked, walking it from the root one directory at a time without
following any symlink: where a part of it has become one (or is no longer a directory), the open
fails with `PathMovedError` and nothing is read or written. Linux and the BSDs (`O_NOFOLLOW`,
`dir_fd`). Blocking: called in the tools' hops off the loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from agentforge.tools.base import ToolError

# A directory on the way, opened only to go on from (O_PATH needs no read permission on it).
_THROUGH = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)


class PathMovedError(ToolError):
    """A part of a checked path is no longer what the check saw."""

    def __init__(self, real: Path) -> None:
        super().__init__(
            f"{real} is no longer where its path led when it was checked: a part of the path was "
            "replaced (by a symlink, say) while this call ran, so nothing was read or written."
        )


def open_file(real: Path, flags: int, mode: int = 0o666, *, make_parents: bool = False) -> int:
    """`os.open` of `real` (a path as the guard resolved it: absolute, no symlink) through no
    symlink; `make_parents`: missing directories on the way are made."""
    if real == Path(real.anchor):  # the root itself: no symlink on the way
        return os.open(real, flags | os.O_CLOEXEC, mode)
    with parent(real, make=make_parents) as (directory, name):
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=directory)
        except OSError as exc:
            # The file itself is a symlink now: ELOOP (ENOTDIR when a directory was asked for).
            if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and is_symlink(directory, name)):
                raise PathMovedError(real) from None
            raise


def unlink(real: Path) -> None:
    """Remove the file at `real` (its parent reached through no symlink; a symlink there is removed,
    never followed)."""
    with parent(real) as (directory, name):
        os.unlink(name, dir_fd=directory)


@contextlib.contextmanager
def parent(real: Path, *, make: bool = False) -> Iterator[tuple[int, str]]:
    """The directory holding `real`, opened through no symlink, and `real`'s name in it."""
    if not real.is_absolute() or real.name in ("", ".", ".."):
        raise ValueError(f"not a resolved path: {real}")
    directory = os.open("/", _THROUGH)
    try:
        for name in real.parts[1:-1]:
            inner = _enter(directory, name, make, real)
            os.close(directory)
            directory = inner
        yield directory, real.name
    finally:
        os.close(directory)


def _enter(directory: int, name: str, make: bool, real: Path) -> int:
    try:
        try:
            return os.open(name, _THROUGH, dir_fd=directory)
        except FileNotFoundError:
            if not make:
                raise
            with contextlib.suppress(FileExistsError):  # made meanwhile: entered as any other
                os.mkdir(name, 0o777, dir_fd=directory)
            return os.open(name, _THROUGH, dir_fd=directory)
    except OSError as exc:
        # A symlink where the check saw a directory: ENOTDIR (ELOOP without O_PATH). A file there
        # is no move: the path names nothing, as the check saw.
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and is_symlink(directory, name):
            raise PathMovedError(real) from None
        raise


def is_symlink(directory: int, name: str) -> bool:
    """Whether `name` in the open `directory` is a symlink (not followed)."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def lstat(real: Path) -> os.stat_result | None:
    """What is at `real` itself (a symlink there is not followed), reached through no symlink; None
    when nothing is."""
    if real == Path(real.anchor):
        return os.stat(real)
    try:
        with parent(real) as (directory, name):
            return os.stat(name, dir_fd=directory, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


@contextlib.contextmanager
def opened(real: Path) -> Iterator[tuple[int, os.stat_result]]:
    """`real` open for reading, through no symlink (a FIFO there does not block the open), and what
    its descriptor says it is."""
    fd = open_file(real, os.O_RDONLY | os.O_NONBLOCK)
    try:
        yield fd, os.fstat(fd)
    finally:
        os.close(fd)


def read_file(shown: Path, real: Path) -> tuple[bytes, os.stat_result] | None:
    """The bytes of the file at `real` (`shown` in messages) and what it was as they were read;
    None when there is none. Anything but a regular file there is refused."""
    try:
        with opened(real) as (fd, now):
            if stat.S_ISDIR(now.st_mode):
                raise ToolError(f"Path is a directory, not a file: {shown}")
            if not stat.S_ISREG(now.st_mode):
                raise ToolError(f"Cannot use {shown}: it is not a regular file")
            with open(fd, "rb", closefd=False) as handle:
                return handle.read(), now
    except (FileNotFoundError, NotADirectoryError):  # nothing there, or a file on the way
        return None


def open_to_search(shown: Path, real: Path, *, missing: str = "Path not found") -> int:
    """The file or directory at `real` (`shown` in messages) open to search or walk, through no
    symlink; anything else there (a FIFO, a device) or nothing (`missing`) is refused as a
    ToolError."""
    try:
        fd = open_file(real, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"{missing}: {shown}") from None
    except PermissionError:
        raise ToolError(f"Permission denied: {shown}") from None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        os.close(fd)
        raise ToolError(f"Cannot search {shown}: it is neither a file nor a directory")
    return fd


@contextlib.contextmanager
def opened_directory(shown: Path, real: Path) -> Iterator[int]:
    """The directory at `real` (`shown` in messages) open, through no symlink, to walk from."""
    fd = open_to_search(shown, real, missing="Directory not found")
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise ToolError(f"Directory not found: {shown}")
        yield fd
    finally:
        os.close(fd)
