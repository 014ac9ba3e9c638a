"""Per-session record of which files the model has read, and per-file edit locks (KERNEL 7.7).

edit and write refuse to touch an existing file the session has not read, or one that changed on
disk since it was read: the model would otherwise overwrite changes it has never seen. We keep the
file's modification time and size at read time (a fingerprint, not the wall clock, so coarse
filesystem timestamps cannot hide a change made right after the read).
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agentforge.tools.base import ToolError


@dataclass(frozen=True, slots=True)
class _ReadStamp:
    mtime_ns: int
    size: int
    read_at: float


_reads: dict[str, dict[Path, _ReadStamp]] = {}
_locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()


def _key(path: Path) -> Path:
    return path.resolve()


@dataclass(frozen=True, slots=True)
class Seen:
    """A file as a read found it (`look`), to be noted for a session (`note_read`)."""

    key: Path
    stamp: _ReadStamp


def look(path: Path) -> Seen:
    """The file's fingerprint now. Blocking (a stat and a resolve): where the read itself runs."""
    stat = os.stat(path)
    return Seen(_key(path), _ReadStamp(mtime_ns=stat.st_mtime_ns, size=stat.st_size, read_at=time.time()))


def note_read(session_id: str, seen: Seen) -> None:
    """Remember that this session has seen the file as `seen` found it."""
    _reads.setdefault(session_id, {})[seen.key] = seen.stamp


def record_read(session_id: str, path: Path) -> None:
    """Remember that this session has seen the file as it is now on disk."""
    note_read(session_id, look(path))


def last_read(session_id: str, path: Path) -> float | None:
    """When this session last read the file (epoch seconds), or None."""
    stamp = _reads.get(session_id, {}).get(_key(path))
    return stamp.read_at if stamp else None


def assert_fresh(session_id: str, path: Path) -> None:
    """Raise ToolError unless the session read this file and it has not changed since."""
    stamp = _reads.get(session_id, {}).get(_key(path))
    if stamp is None:
        raise ToolError(f"You must read file {path} before overwriting it. Use the read tool first.")
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        # Gone since the read: callers that need the file report that themselves.
        return
    if stat.st_mtime_ns != stamp.mtime_ns or stat.st_size != stamp.size:
        raise ToolError(
            f"File {path} has been modified since it was last read.\n"
            f"Last modification: {_iso(stat.st_mtime_ns / 1e9)}\n"
            f"Last read: {_iso(stamp.read_at)}\n\n"
            "Please read the file again before modifying it."
        )


def assert_unchanged(path: Path, seen: Seen | None) -> None:
    """Raise ToolError unless the file is still as `seen` found it (None: there was no file), e.g.
    when it changed while a change to it waited for approval: written over, what was done meanwhile
    would be lost. Blocking: where the write runs, right before it."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        if seen is None:
            return
        raise ToolError(_changed_meanwhile(path, "was deleted")) from None
    if seen is None:
        raise ToolError(_changed_meanwhile(path, "was created"))
    if stat.st_mtime_ns != seen.stamp.mtime_ns or stat.st_size != seen.stamp.size:
        raise ToolError(_changed_meanwhile(path, "was modified"))


def _changed_meanwhile(path: Path, what: str) -> str:
    return (
        f"File {path} {what} while this change waited to be made, so nothing was written "
        "(it would have undone that). Read the file again, then make the change anew."
    )


def forget_session(session_id: str) -> None:
    _reads.pop(session_id, None)


def file_lock(path: Path) -> asyncio.Lock:
    """The lock serialising edits of one file (shared by every session in this process)."""
    key = _key(path)
    lock = _locks.get(key)
    if lock is None:
        lock = asyncio.Lock()
        _locks[key] = lock
    return lock


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds).astimezone().isoformat(timespec="milliseconds")
