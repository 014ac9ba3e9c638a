"""Files only the server's OS user may read: the data directory (0700), the SQLite database, key and
checkpoint files (0600), created that way rather than chmod-ed afterwards (no window in which the
umask's default lets another user open them). Existing files and directories keep their mode: the
operator may have chosen it (`doctor` reports a data directory others can read)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

PRIVATE_DIR_MODE: Final = 0o700
PRIVATE_FILE_MODE: Final = 0o600


def make_private_dir(path: Path) -> None:
    """Create `path` (and missing parents) 0700; an existing directory is left as it is."""
    if path.is_dir():
        return
    missing = [parent for parent in (path, *path.parents) if not parent.exists()]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by another process
        # mkdir's mode is masked by the umask: set it exactly (the directory is new and ours).
        os.chmod(directory, PRIVATE_DIR_MODE)


def create_private_file(path: Path, data: bytes = b"") -> None:
    """Create `path` 0600 with `data`; FileExistsError when it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def ensure_private_file(path: Path) -> None:
    """Create an empty `path` 0600 (its directory 0700) unless it exists: SQLite then opens it as is,
    and makes its -wal and -shm files with the same mode."""
    make_private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        create_private_file(path)
