"""What `agentforge serve` does once before serving, in a short-lived child process: bring the
database to the newest schema, audit the config it starts with, and sign the start's audit checkpoint.

These are one-off and heavy in memory: Alembic with its migration scripts (~11 MB) and the signing
library (~8 MB) would stay resident in the server for as long as it runs. A start with nothing to do
(a restart: the schema at head, the last checkpoint recent and recording these heads) starts no child.
The child is only a saving: whatever it did not do, the server does itself as before (`Store.open`
migrates, the runtime audits the config, the checkpoint task signs), with the same errors. A database
migrated by its owner (`database.owner_url`: the grants to the runtime role go with it) is left to
the store. `serve` starts the child before it imports the server stack and waits for it after: the
two run side by side. The child is forked where that is safe: it starts with what `serve` imported
by then (the config, SQLAlchemy, the store), which a fresh interpreter would import again (~0.4 s of
CPU, the larger part of the child's work), and what it imports itself stays in it as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import multiprocessing
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from agentforge.config import Settings
from agentforge.runtime.checkpoints import start_checkpoint_needed, take_start_checkpoint
from agentforge.runtime.config_audit import record_loaded_config
from agentforge.store.audit_verify import AuditDatabaseError, read_database
from agentforge.store.engine import parse_database_url
from agentforge.store.migrate import HEAD_REVISION, current_revision, upgrade_to_head

log = logging.getLogger(__name__)


def start_preparing(
    settings: Settings,
    initializer: Callable[[], object] | None = None,
    *,
    inherited: Sequence[socket.socket] = (),
) -> Preparing | None:
    """Start a child process preparing when there is anything to do (None: nothing), without waiting
    for it: the caller imports the server meanwhile (on two cores, at the same time) and calls
    `finish` before the server starts. `initializer` runs first in the child (`serve` passes what
    makes a process non-dumpable: the child holds the same secrets). `inherited`: sockets of the
    caller's that a forked child closes first (`serve`'s listener: the child never accepts)."""
    if not _needs_preparing(settings):
        return None
    method = _start_method()
    context = multiprocessing.get_context(method)
    if method == "fork":  # not pickled: a fork copies the caller, sockets and collector included
        initializer = functools.partial(_forked, [sock.fileno() for sock in inherited], initializer)
    pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=initializer)
    try:
        future = pool.submit(prepare, settings)
    except Exception as exc:  # reported by `finish`, once the server's logging is set up
        pool.shutdown(wait=False, cancel_futures=True)
        future = Future()
        future.set_exception(exc)
    return Preparing(pool, future)


@dataclass(slots=True)
class Preparing:
    """A child process preparing."""

    pool: ProcessPoolExecutor
    future: Future[Prepared]

    def finish(self) -> None:
        """Wait for the child, log what it did and end it. Blocking."""
        try:
            prepared = self.future.result()
        except Exception as exc:  # the child is only a saving: the server prepares itself
            log.debug("Preparing in a child process failed (%s); the server prepares itself", exc)
            return
        finally:
            self.pool.shutdown()
        for line in prepared.done:
            log.info(line)
        if prepared.failed is not None:
            log.debug("Preparing in a child process stopped (%s); the server does the rest", prepared.failed)


@dataclass(frozen=True, slots=True)
class Prepared:
    done: list[str]  # what the child did, as log lines
    failed: str | None = None  # the step it stopped at, and why


def prepare(settings: Settings) -> Prepared:
    """In the child: migrate, audit the config, sign the start checkpoint. It stops at the first
    failure: the server repeats that step and reports its error as it always did."""
    done: list[str] = []
    try:
        before = _revision(settings)
        if before != HEAD_REVISION:
            upgrade_to_head(settings.database_url)
            done.append(
                f"Database created at schema {HEAD_REVISION}"
                if before is None
                else f"Database migrated from schema {before} to {HEAD_REVISION}"
            )
        asyncio.run(record_loaded_config(settings))  # the server then finds it recorded: no new head
        interval = settings.config.audit.checkpoint_interval
        if interval and (checkpoint := take_start_checkpoint(settings, interval)) is not None:
            done.append(f"Audit checkpoint of {len(checkpoint.heads)} chain(s) written")
    except Exception as exc:  # any failure is the server's to report, with its own message
        return Prepared(done, f"{type(exc).__name__}: {exc}")
    return Prepared(done)


def _forked(descriptors: list[int], initializer: Callable[[], object] | None) -> None:
    """First thing in a forked child: close what it must not hold (the listener, whose port would
    outlive the server while the child runs) and collect garbage again (`serve` forks with the
    collector paused: cli/gcpause.py)."""
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)
    gc.enable()
    if initializer is not None:
        initializer()


def _start_method() -> str:
    """Fork on Linux when this process runs no other thread (`serve`, before it imports the server),
    else spawn a fresh interpreter. A fork copies only the forking thread, and with it any lock
    another thread held at that moment (the import lock, a logging handler's), which the child would
    wait on forever; elsewhere forking is unsafe beside the system's libraries (macOS) or missing."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return "fork"
    return "spawn"


def _revision(settings: Settings) -> str | None:
    """The schema the database is at (None: no database yet). Blocking."""
    target = parse_database_url(settings.database_url)
    if target.dialect == "sqlite" and not target.sqlite_path.exists():
        return None
    return read_database(settings.database_url, current_revision)


def _needs_preparing(settings: Settings) -> bool:
    if settings.database_owner_url is not None:
        return False
    try:
        if _revision(settings) != HEAD_REVISION:
            return True
        interval = settings.config.audit.checkpoint_interval
        return bool(interval) and start_checkpoint_needed(settings, interval)
    except (AuditDatabaseError, OSError):
        return False  # the server reports what is wrong
