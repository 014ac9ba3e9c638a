"""What the file system says about a session's directory for its system prompt: whether it is in a git
repo, and its instruction files (KERNEL 7.8). Looked up once, then re-checked cheaply at every model call.

The full look-up (the `.git` search, the instruction files' search up the tree, reading them) runs in a
worker thread. Its result is kept with a fingerprint of every path it depended on: whether `.git`
exists in each directory from the session's up to the nearest one that has it (the root when none
does), and the inode, modification and change times and size (or absence) of every candidate
instruction file (each project file name in each directory searched, the global AGENTS.md). A later
model call re-takes the fingerprint with these few `stat` calls, in one hop to a worker thread (the
loop starts it while the history is read, so it adds no wait; not on the event loop: a workspace on a
stalled network file system must stall only its own sessions). It reuses the result only when nothing
changed; otherwise the same hop looks again. So an added,
removed or edited instruction file, or a new or removed `.git`, is seen on the next model call, as
before. Unrelated changes (files the session's tools write, other entries of /tmp) do not count.

Never reused: a look-up with configured `instructions` globs (they can match anywhere below the
workspace, which the fingerprint does not cover), and one that read an instruction file changed less
than `RACY_SECONDS` before: file systems keep times at a coarse granularity, so a second edit within
the same tick could leave the file's times and size as they were (git's "racy" entries).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agentforge.session.context.instructions import (
    GLOBAL_FILE,
    PROJECT_FILES,
    InstructionSources,
    instruction_paths,
    instruction_texts,
    search_chain,
)
from agentforge.tools.confinement import WorkspaceBoundary

RACY_SECONDS: Final = 2.0  # coarser than any local file system's time granularity (FAT: 2 s)
_CACHE_SIZE: Final = 256

# A path's inode, modification and change times, and size; None when it does not exist.
Stamp = tuple[int, int, int, int] | None


@dataclass(frozen=True, slots=True)
class SystemContext:
    """Where the session runs: its own directory, the workspace root, and where instructions come from."""

    directory: Path
    workspace: Path
    config_dir: Path
    instruction_patterns: tuple[str, ...] = ()
    boundary: WorkspaceBoundary | None = None  # a confined tenant reads no instruction file outside it

    @property
    def sources(self) -> InstructionSources:
        return InstructionSources(
            self.directory, self.workspace, self.config_dir, self.instruction_patterns, self.boundary
        )


@dataclass(frozen=True, slots=True)
class Surroundings:
    """What the file system says about a session's directory: a git repo or not, the instructions."""

    is_git: bool
    instructions: list[str]


@dataclass(frozen=True, slots=True)
class _Seen:
    surroundings: Surroundings
    gits: tuple[Path, ...]  # `.git` paths, nearest first, up to the one found (if any)
    git_at: int | None  # the one of `gits` that exists
    candidates: tuple[Path, ...]  # every instruction file that was or could have been read
    stamps: tuple[Stamp, ...]  # of `candidates`


_NEVER: Final = (None,)  # stamps no tuple of candidates' stamps equals: the result is not reused


def known(context: SystemContext) -> Surroundings | None:
    """The last look-up's result when nothing it depended on changed since; None: look again.
    Blocking (a few `stat` calls)."""
    with _lock:
        seen = _cache.get(context)
    if seen is None or _stamps(seen.candidates) != seen.stamps or _git_at(seen.gits) != seen.git_at:
        return None
    with _lock:
        if context in _cache:
            _cache.move_to_end(context)
    return seen.surroundings


async def look_around(context: SystemContext) -> Surroundings:
    """The known result, else a new look-up: one hop off the event loop for all the file system work."""
    return await asyncio.to_thread(_known_or_looked, context)


class LookAhead:
    """A look-up started ahead of the model call it is for (a prompt starts it as soon as it has read
    its session, so it runs while the user message is written): `take` hands it to that call once;
    `drop` ends it when nobody took it."""

    def __init__(self, context: SystemContext) -> None:
        self._pending: asyncio.Future[Surroundings] | None = asyncio.ensure_future(look_around(context))

    def take(self) -> asyncio.Future[Surroundings] | None:
        pending, self._pending = self._pending, None
        return pending

    def drop(self) -> None:
        unused(self.take())


def unused(pending: asyncio.Future[Surroundings] | None) -> None:
    """Let go of a look-up nobody will wait for: cancelled if still running, its failure retrieved
    (not an error: nobody needed it)."""
    if pending is None:
        return
    if not pending.done():
        pending.cancel()
    elif not pending.cancelled():
        pending.exception()


def _known_or_looked(context: SystemContext) -> Surroundings:
    cached = known(context)
    if cached is not None:
        return cached
    seen = _look_around(context)
    with _lock:
        _cache[context] = seen
        _cache.move_to_end(context)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return seen.surroundings


def _look_around(context: SystemContext) -> _Seen:
    """The look-up with its fingerprint (blocking: call it from a thread). The fingerprint is taken
    before the look: a change after it shows in a later fingerprint."""
    chain = (context.directory, *context.directory.parents)
    gits = tuple(folder / ".git" for folder in chain)
    git_at = _git_at(gits)
    if git_at is not None:
        gits = gits[: git_at + 1]  # a `.git` further up changes nothing
    searched = search_chain(context.directory, context.workspace)
    candidates = (
        *(folder / name for name in PROJECT_FILES for folder in searched),
        context.config_dir / GLOBAL_FILE,
    )
    taken = time.time_ns()
    stamps = _stamps(candidates)
    paths = instruction_paths(context.sources)
    found = Surroundings(git_at is not None, instruction_texts(paths))
    if context.instruction_patterns or _racy(stamps, taken):
        return _Seen(found, (), None, (), _NEVER)
    return _Seen(found, gits, git_at, candidates, stamps)


def _git_at(gits: tuple[Path, ...]) -> int | None:
    """The index of the first of these `.git` paths that exists."""
    return next((at for at, path in enumerate(gits) if os.path.exists(path)), None)


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
