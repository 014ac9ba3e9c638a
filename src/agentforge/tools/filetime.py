"""Per-session record of which files the model has read, per-file edit locks, and the write that
checks the file is still as it was read (KERNEL 7.7).

edit and write refuse to touch an existing file the session has not read, or one that changed on
disk since it was read: the model would otherwise overwrite changes it has never seen. And a change
computed from a file is written only if the file is still as it was then (`write_if_unchanged`,
`assert_unchanged`): a person may take minutes to approve it, and whatever was done to the file
meanwhile would be undone. A file is known by its modification and change times, its size and its
inode (a fingerprint, not the wall clock: a change right after a read shows even within the same
second; only one of the same size within one tick of the file system's clock could go unseen).

What touches the file system (`assert_unchanged`, `write_if_unchanged`) blocks: tools call it in
their hops off the loop, where they open and stat files themselves (`seen_as` a stat they took).
The record itself is changed on the loop (`note_read`, `forget_session`). A file is written through
tools/pinned.py: where the guard saw its path lead, whatever symlink was put in it since.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from agentforge.tools import pinned
from agentforge.tools.base import ToolError


@dataclass(frozen=True, slots=True)
class _ReadStamp:
    # The modification time and size, the change time (no program can set it back, as `touch -r`
    # or `cp -p` do the modification time) and the inode (an editor's save by rename makes a new
    # file): any of them differs, the file is not the one read.
    version: tuple[int, ...]
    mtime_ns: int
    read_at: float

    def matches(self, found: os.stat_result) -> bool:
        return _version(found) == self.version

    def same_content(self, found: os.stat_result) -> bool:
        """The modification time and size alone: what a copy-up keeps."""
        return (found.st_mtime_ns, found.st_size) == self.version[:2]


def _version(found: os.stat_result) -> tuple[int, ...]:
    return (found.st_mtime_ns, found.st_size, found.st_ctime_ns, found.st_dev, found.st_ino)


# What the sessions have read (the key: the session id), least recently noted first. A process
# serves sessions for months: past MAX_READ_RECORDS files the least recently reading sessions'
# records go (such a session's next edit asks for a read first, as after a restart).
MAX_READ_RECORDS: Final = 50_000
_reads: OrderedDict[str, dict[Path, _ReadStamp]] = OrderedDict()
_recorded = 0  # files recorded over all sessions
_locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()


@dataclass(frozen=True, slots=True)
class Seen:
    """A file as a read found it (`seen_as`), to be noted for a session (`note_read`)."""

    key: Path  # where it is (symlinks followed)
    stamp: _ReadStamp
    mode: int  # its permission bits

    @property
    def inode(self) -> tuple[int, int]:
        """Which file it is, whatever its names (device, inode)."""
        return self.stamp.version[3], self.stamp.version[4]


def seen_as(real: Path, found: os.stat_result) -> Seen:
    """The file at `real` (as the guard resolved it) as `found`, a stat of it, found it."""
    stamp = _ReadStamp(_version(found), found.st_mtime_ns, read_at=time.time())
    return Seen(real, stamp, mode=found.st_mode & 0o7777)


def note_read(session_id: str, seen: Seen) -> None:
    """Remember that this session has seen the file as `seen` found it."""
    global _recorded
    reads = _reads.setdefault(session_id, {})
    _reads.move_to_end(session_id)
    if reads.pop(seen.key, None) is None:
        _recorded += 1
    reads[seen.key] = seen.stamp  # last: the most recently read
    while _recorded > MAX_READ_RECORDS:
        oldest = next(iter(_reads))
        if oldest != session_id:
            forget_session(oldest)
        else:  # this session alone holds them all: its least recently read file goes
            del reads[next(iter(reads))]
            _recorded -= 1


def last_read(session_id: str, real: Path) -> float | None:
    """When this session last read the file at `real` (as the guard resolved it), or None."""
    stamp = _reads.get(session_id, {}).get(real)
    return stamp.read_at if stamp else None


def assert_fresh_as(session_id: str, shown: Path, seen: Seen) -> None:
    """Raise ToolError unless the session read this file (`shown` in messages; `seen`: as the
    descriptor just opened on it says it is) and it has not changed since."""
    stamp = _read_stamp(session_id, shown, seen.key)
    if stamp.version != seen.stamp.version:
        raise ToolError(_modified_since_read(shown, seen.stamp.mtime_ns, stamp))


def _read_stamp(session_id: str, shown: Path, key: Path) -> _ReadStamp:
    stamp = _reads.get(session_id, {}).get(key)
    if stamp is None:
        raise ToolError(f"You must read file {shown} before overwriting it. Use the read tool first.")
    return stamp


def _modified_since_read(shown: Path, mtime_ns: int, stamp: _ReadStamp) -> str:
    return (
        f"File {shown} has been modified since it was last read.\n"
        f"Last modification: {_iso(mtime_ns / 1e9)}\n"
        f"Last read: {_iso(stamp.read_at)}\n\n"
        "Please read the file again before modifying it."
    )


def assert_unchanged(shown: Path, real: Path, seen: Seen | None) -> None:
    """Raise ToolError unless the file at `real` (`shown` in messages) is still as `seen` found it
    (None: there was no file)."""
    now = pinned.lstat(real)
    if now is None:
        if seen is None:
            return
        raise ToolError(_changed_meanwhile(shown, "was deleted"))
    if seen is None:
        raise ToolError(_changed_meanwhile(shown, "was created"))
    if not (stat.S_ISREG(now.st_mode) and seen.stamp.matches(now)):
        raise ToolError(_changed_meanwhile(shown, "was modified"))


def write_if_unchanged(
    shown: Path, real: Path, content: str, seen: Seen | None, *, mode: int | None = None
) -> Seen:
    """Write `content` (its line endings as they are) to the file at `real` (`shown` in messages),
    unless it changed since `seen` (None: there was none; missing directories are made; `mode`: the
    new file's permission bits); the file as written. Reached through no symlink (tools/pinned.py)
    and checked right before it is opened, then again once open."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate: refused before the file is touched
        raise ToolError(f"Cannot write {shown}: the content is not valid text ({error.reason}).") from None
    with pinned.parent(real, make=seen is None) as (directory, name):
        fd = _open_unchanged(shown, directory, name, seen)
    with open(fd, "wb") as handle:
        if mode is not None:
            os.fchmod(fd, mode)
        handle.write(data)
        handle.flush()
        return seen_as(real, os.fstat(fd))  # as written: a change after it is one the model has not seen


def _open_unchanged(shown: Path, directory: int, name: str, seen: Seen | None) -> int:
    """`name` in `directory` open for writing, emptied, if it is still as `seen` found it (None:
    created, if nothing is there)."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    if seen is None:
        try:
            return os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=directory)
        except FileExistsError:  # a symlink there too, never followed
            raise ToolError(_changed_meanwhile(shown, "was created")) from None
    # Checked whole before the open: opening a file of a container image's lower layer for writing
    # copies it up, which gives it a new change time (and, there, maybe a new inode).
    try:
        before = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        raise ToolError(_changed_meanwhile(shown, "was deleted")) from None
    if not (stat.S_ISREG(before.st_mode) and seen.stamp.matches(before)):
        raise ToolError(_changed_meanwhile(shown, "was modified"))
    fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=directory)
    now = os.fstat(fd)  # what was opened is the file checked: not replaced in between
    if not (stat.S_ISREG(now.st_mode) and seen.stamp.same_content(now)):
        os.close(fd)
        raise ToolError(_changed_meanwhile(shown, "was modified"))
    os.ftruncate(fd, 0)
    return fd


def _changed_meanwhile(path: Path, what: str) -> str:
    return (
        f"File {path} {what} while this change waited to be made, so nothing was written "
        "(it would have undone that). Look at the file again, then make the change anew."
    )


def forget_session(session_id: str) -> None:
    """Drop what the session has read (it was deleted, or has not read for the longest)."""
    global _recorded
    _recorded -= len(_reads.pop(session_id, {}))


def file_lock(real: Path) -> asyncio.Lock:
    """The lock serialising edits of the file at `real` (as the guard resolved it: not resolved again,
    which could meet a symlink put there since), shared by every session in this process."""
    lock = _locks.get(real)
    if lock is None:
        lock = asyncio.Lock()
        _locks[real] = lock
    return lock


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds).astimezone().isoformat(timespec="milliseconds")
