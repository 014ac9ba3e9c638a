"""What the file system says about a session's directory for its system prompt: whether it is in a git
repo, and its instruction files (KERNEL 7.8). Looked up once, then re-checked cheaply at every model call.

The full look-up (the `.git` search, the instruction files' search up the tree, reading them) runs in a
worker thread. Its result is kept with a fingerprint of what it depended on: the inode, modification
and change times of every directory from the session's directory up to the nearest `.git` (up to the
root when there is none; at least up to the workspace root) and of the config directory (adding,
removing or renaming an entry, such as a new `.git` or a new AGENTS.md, changes its directory's
modification time), and those and the size of every instruction file it read (an edit changes them).
A later model call re-takes the fingerprint with these few `stat` calls, made on the event loop: file
metadata the kernel holds cached costs microseconds, less than a hand-off to a thread and back (a
deliberate exception to "no file system call on the loop", bounded by the depth of the directory).
It reuses the result only when nothing changed; otherwise it looks again in a thread. So a changed
instruction file or a new `.git` is seen on the next model call, as before.

Never reused: a look-up with configured `instructions` globs (they can match anywhere below the
workspace, which the fingerprint does not cover), and one whose fingerprint held a modification time
less than `RACY_SECONDS` old when it was taken: file systems keep times at a coarse granularity, so a
second change within the same tick would leave that time as it was (git's "racy" entries).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from agentforge.session.context.instructions import instruction_paths, instruction_texts, search_chain

if TYPE_CHECKING:
    from agentforge.session.context.system import SystemContext

RACY_SECONDS: Final = 2.0  # coarser than any local file system's time granularity (FAT: 2 s)
_CACHE_SIZE: Final = 256

# A path's inode, modification and change times, and size; None when it does not exist.
Stamp = tuple[int, int, int, int] | None


@dataclass(frozen=True, slots=True)
class Surroundings:
    """What the file system says about a session's directory: a git repo or not, the instructions."""

    is_git: bool
    instructions: list[str]


@dataclass(frozen=True, slots=True)
class _Seen:
    surroundings: Surroundings
    paths: tuple[Path, ...]  # directories, then the instruction files read
    stamps: tuple[Stamp, ...]


def known(context: SystemContext) -> Surroundings | None:
    """The last look-up's result when nothing it depended on changed since; None: look again."""
    with _lock:
        seen = _cache.get(context)
    if seen is None or _stamps(seen.paths) != seen.stamps:
        return None
    with _lock:
        if context in _cache:
            _cache.move_to_end(context)
    return seen.surroundings


async def look_around(context: SystemContext) -> Surroundings:
    """The known result, else one hop off the event loop for all the file system work."""
    cached = known(context)
    if cached is not None:
        return cached
    seen = await asyncio.to_thread(_look_around, context)
    with _lock:
        _cache[context] = seen
        _cache.move_to_end(context)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return seen.surroundings


def _look_around(context: SystemContext) -> _Seen:
    """The look-up with its fingerprint (blocking: call it from a thread)."""
    if context.instruction_patterns:
        is_git = any((folder / ".git").exists() for folder in (context.directory, *context.directory.parents))
        found = Surroundings(is_git, instruction_texts(instruction_paths(context.sources)))
        return _Seen(found, (), (None,))  # never matches: looked up again next time
    taken = time.time_ns()
    chain = (context.directory, *context.directory.parents)
    # The directories the answer depends on: up to the nearest `.git` (a `.git` above it changes
    # nothing; its removal changes its directory) or the root when there is none, and up to the
    # workspace root for the instruction files; stamped before the look, so a change after it
    # shows in a later stamp.
    needed = len(search_chain(context.directory, context.workspace))
    directory_stamps: list[Stamp] = []
    git_at: int | None = None
    for depth, folder in enumerate(chain):
        if git_at is not None and depth >= needed:
            break
        directory_stamps.append(_stamp(folder))
        if git_at is None and (folder / ".git").exists():
            git_at = depth
    directories = (*chain[: len(directory_stamps)], context.config_dir)
    directory_stamps.append(_stamp(context.config_dir))
    paths = instruction_paths(context.sources)
    file_stamps = _stamps(paths)  # before the files are read, for the same reason
    surroundings = Surroundings(git_at is not None, instruction_texts(paths))
    stamps = (*directory_stamps, *file_stamps)
    if _racy(stamps, taken):
        return _Seen(surroundings, (), (None,))  # never matches: looked up again next time
    return _Seen(surroundings, (*directories, *paths), stamps)


def _stamps(paths: tuple[Path, ...] | list[Path]) -> tuple[Stamp, ...]:
    return tuple(_stamp(path) for path in paths)


def _stamp(path: Path) -> Stamp:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)


def _racy(stamps: tuple[Stamp, ...], taken_ns: int) -> bool:
    """A modification time this recent may be shared by a change still to come (the same tick). An
    older one cannot: every later change sets a newer one."""
    newest = taken_ns - int(RACY_SECONDS * 1e9)
    return any(stamp is not None and stamp[1] >= newest for stamp in stamps)


_lock = threading.Lock()  # event loops of several threads (in-process test servers) share the cache
_cache: OrderedDict[SystemContext, _Seen] = OrderedDict()
