"""Walking a directory tree for the search tools (glob, grep), skipping what is never wanted."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ALWAYS_SKIPPED_DIRS = frozenset({".git", "node_modules"})


@dataclass(frozen=True, slots=True)
class Walked:
    """A file found by `walk_files`."""

    path: Path  # under the root as the caller named it: what the model is shown
    relative: str  # slash-separated, from the root
    directory: int  # the directory holding it, open while the walk is there (for `dir_fd`)
    name: str


def walk_files(
    root: Path, directory: int, skip_dirs: frozenset[str] = ALWAYS_SKIPPED_DIRS
) -> Iterator[Walked]:
    """Every file under the directory open as `directory` (`root`, as named, for the paths shown).

    The walk goes down from the open directory one open directory at a time and never through a
    symlink (os.fwalk: a directory swapped for a symlink meanwhile is not entered), so it stays
    where the root's check saw it. Symlinked directories are not followed; a symlinked file is
    listed only when it leads inside the root (glob names it; grep, opening through no symlink,
    skips it, as ripgrep does); unreadable directories are skipped.
    """
    inside = os.path.realpath(f"/proc/self/fd/{directory}")
    for base, dirnames, filenames, held in os.fwalk(".", dir_fd=directory):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        relative_dir = os.path.normpath(base)
        for name in sorted(filenames):
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            if _is_symlink(held, name) and not _leads_inside(inside, relative):
                continue
            yield Walked(root / relative, relative, held, name)


def _is_symlink(directory: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _leads_inside(inside: str, relative: str) -> bool:
    target = os.path.realpath(os.path.join(inside, relative))
    return target == inside or target.startswith(inside.rstrip("/") + "/")
