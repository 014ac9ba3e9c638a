"""Walking a directory tree for the search tools (glob, grep), skipping what is never wanted."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

ALWAYS_SKIPPED_DIRS = frozenset({".git", "node_modules"})


def walk_files(root: Path, skip_dirs: frozenset[str] = ALWAYS_SKIPPED_DIRS) -> Iterator[tuple[Path, str]]:
    """(absolute path, slash-separated path relative to `root`) for every file under `root`.

    Symlinked directories are not followed (no cycles, no escaping the workspace through them);
    symlinked files leading outside `root` are left out for the same reason (grep would read them);
    unreadable directories are skipped.
    """
    real_root = root.resolve()
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        base = Path(directory)
        relative_dir = base.relative_to(root).as_posix()
        for name in sorted(filenames):
            path = base / name
            if path.is_symlink() and not path.resolve().is_relative_to(real_root):
                continue
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            yield path, relative
