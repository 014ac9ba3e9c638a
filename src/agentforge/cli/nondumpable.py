"""Keep other processes of the server's OS user out of the server process (Linux).

A process of the same uid may read `/proc/<pid>/environ` (the database password, provider keys) and
ptrace the server, unless the server is non-dumpable: then /proc/<pid> entries belong to root and
ptrace attach is refused. Commands a tenant runs are such processes. The flag is reset by execve, so
the server's children (tools, MCP servers) keep their own usual behaviour.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

PR_SET_DUMPABLE = 4


class NonDumpableError(Exception):
    """prctl refused to clear the dumpable flag."""


def make_non_dumpable() -> bool:
    """Clear the process's dumpable flag on Linux (True); elsewhere do nothing (False)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise NonDumpableError(f"prctl(PR_SET_DUMPABLE, 0) failed with errno {errno}")
    return True
