"""Walking a directory tree for the search tools (glob, grep), skipping what is never wanted."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentforge.tools import pinned

ALWAYS_SKIPPED_DIRS = frozenset({".git", "node_modules"})
# How deep a walk goes: os.fwalk holds a descriptor per level (and recurses, up to Python 3.12).
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class Walked:
    """A file found by `walk_files`."""

    path: Path  # under the root as the caller named it: what the model is shown
    relative: str  # slash-separated, from the root
    directory: int  # the directory holding it, open while the walk is there (for `dir_fd`)
    name: str


def walk_files(
    root: Path, real: Path, directory: int, skip_dirs: frozenset[str] = ALWAYS_SKIPPED_DIRS
) -> Iterator[Walked]:
    """Every file under the directory open as `directory` (`root`, as named, for the paths shown;
    `real`, where its check saw it lead), down to `MAX_DEPTH` levels.

    The walk goes down from the open directory one open directory at a time and never through a
    symlink (os.fwalk: a directory swapped for a symlink meanwhile is not entered), so it stays
    where the root's check saw it. Symlinked directories are not followed; a symlinked file is
    listed only when it leads inside the root (glob names it; grep, opening through no symlink,
    skips it, as ripgrep does); unreadable directories are skipped.
    """
    for base, dirnames, filenames, held in os.fwalk(".", dir_fd=directory):
        relative_dir = os.path.normpath(base)
        deep = relative_dir != "." and relative_dir.count("/") + 1 >= MAX_DEPTH
        dirnames[:] = [] if deep else sorted(d for d in dirnames if d not in skip_dirs)
        for name in sorted(filenames):
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            if pinned.is_symlink(held, name) and not _leads_inside(real, relative):
                continue
            yield Walked(root / relative, relative, held, name)


def _leads_inside(real: Path, relative: str) -> bool:
    """Whether a symlinked file leads inside the root (a name only: nothing is opened through it)."""
    try:
        return Path(os.path.realpath(real / relative)).is_relative_to(real)
    except (OSError, ValueError):  # swapped while it was resolved, say
        return False
