"""Programs of the server's own reading a tenant's workspace (the git reader, ripgrep): at most
`PROGRAMS_PER_WORKSPACE` of them run at a time per workspace, so one tenant's requests (each held
until its timeout by a FIFO where a program reads, say) never hold more processes than that."""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import Final

PROGRAMS_PER_WORKSPACE: Final = 2
# A workspace's semaphore lives while a read holds or awaits it.
_running: weakref.WeakValueDictionary[Path, asyncio.Semaphore] = weakref.WeakValueDictionary()


def turn_of(root: Path) -> asyncio.Semaphore:
    """The semaphore a program reading the workspace `root` (as configured) runs under."""
    semaphore = _running.get(root)
    if semaphore is None:
        semaphore = _running[root] = asyncio.Semaphore(PROGRAMS_PER_WORKSPACE)
    return semaphore
