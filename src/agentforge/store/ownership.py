"""Which process owns a database: the one allowed to close turns that a crash left running.

Start-up recovery cannot tell a crashed turn from one another live process is running, so only the
sole owner runs it. SQLite: an exclusive `flock` on a file beside the database. Postgres: a
session-level advisory lock (keyed by schema) held on one connection for the store's lifetime. A
process that dies releases either at once, so the next one to start takes over.

A SQLite database also serves one server process at most: `agentforge serve` takes a second
exclusive `flock` (`<database>.server`), so a second server on the same data directory refuses to
start instead of running turns beside the first (replicas need Postgres).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text

if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer brings its ORM (~7 MB): only Postgres uses it (engine.py).
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

SERVER_LOCK_SUFFIX = ".server"
_ADVISORY_CLAIM = text("SELECT pg_try_advisory_lock(hashtext(current_schema() || :key))")
_ADVISORY_KEY = {"key": "/agentforge-owner"}


class Ownership(ABC):
    @abstractmethod
    async def claim(self) -> bool:
        """Take ownership if no other live process holds it; True when this process now owns it."""

    @abstractmethod
    async def release(self) -> None: ...


class FileOwnership(Ownership):
    def __init__(self, database: Path, suffix: str = ".owner") -> None:
        self._path = database.with_name(database.name + suffix)
        self._fd: int | None = None

    async def claim(self) -> bool:
        if self._fd is not None:
            return True
        self._fd = await asyncio.to_thread(self._try_lock)
        return self._fd is not None

    def _try_lock(self) -> int | None:
        return _try_flock(self._path)

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the lock


def _try_flock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def server_running(database: Path) -> bool:
    """Whether a live `agentforge serve` holds the SQLite database's server lock: taken and dropped
    at once, so `serve` can say so in one line before starting (the store's claim stays the guard).
    Blocks briefly: call it before the event loop runs."""
    if not database.parent.is_dir():
        return False
    fd = _try_flock(database.with_name(database.name + SERVER_LOCK_SUFFIX))
    if fd is None:
        return True
    os.close(fd)
    return False


class AdvisoryOwnership(Ownership):
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None

    async def claim(self) -> bool:
        if self._conn is not None:
            return True
        conn = await self._engine.connect()
        if await conn.scalar(_ADVISORY_CLAIM, _ADVISORY_KEY):
            await conn.commit()  # end the implicit transaction; the session-level lock stays
            self._conn = conn
            return True
        await conn.close()
        return False

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()  # the lock ends with the database session
