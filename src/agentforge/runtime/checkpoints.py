"""Audit checkpoints as the server takes them: the key and file the `audit` config names, the
database role that sees every chain, and the periodic task (store/audit_checkpoints.py says what a
checkpoint is and why).

The server takes one when it starts and then every `audit.checkpoint_interval` seconds; `agentforge
audit checkpoint` takes one on demand. Reading every tenant's chain head needs a role that sees them
all: on Postgres the owner (`database.owner_url`). A checkpoint that fails is logged as a warning and
tried again at the next interval (`doctor` reports the latest one growing old).

At start, a checkpoint the file's last one already makes (the same heads, signed less than an
interval ago: a restart with no audit row since) is not signed again. It would add nothing, and not
signing spares the server the signing library (`cryptography`, ~8 MB resident); the doctor's bound
on the latest one's age (two intervals) still holds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path

from agentforge.config import Settings
from agentforge.store.audit_checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointKey,
    Head,
    append_checkpoint,
    last_checkpoint,
    load_key_file,
)
from agentforge.store.audit_verify import AuditDatabaseError, heads_of_database

log = logging.getLogger(__name__)


def checkpoint_key(settings: Settings, *, create: bool) -> CheckpointKey:
    """The signing key: `audit.checkpoint_key` (PEM), else the key file (generated 0600 on first use
    when `create`). Blocking file IO."""
    inline = settings.config.audit.checkpoint_key
    if inline is not None:
        return CheckpointKey.from_pem(inline.encode(), where="audit.checkpoint_key")
    return load_key_file(settings.config.audit.key_file(settings.data_dir), create=create)


def checkpoint_file(settings: Settings) -> Path:
    return settings.config.audit.file(settings.data_dir)


def chains_url(settings: Settings) -> str:
    """A database URL whose role reads every tenant's chain: the owner's when configured."""
    return settings.database_owner_url or settings.database_url


def take_checkpoint(settings: Settings, out: Path | None = None, url: str | None = None) -> Checkpoint:
    """Sign every tenant's chain head and append the checkpoint to `out` (default: the configured
    checkpoint file). Blocking: database and file IO."""
    key = checkpoint_key(settings, create=True)
    heads = heads_of_database(url or chains_url(settings))
    checkpoint = key.sign(heads)
    append_checkpoint(out or checkpoint_file(settings), checkpoint)
    return checkpoint


def take_start_checkpoint(
    settings: Settings, fresh_for: float, now_ms: int | None = None
) -> Checkpoint | None:
    """The server's checkpoint at start: None, and nothing signed, when the file's last checkpoint
    records these very heads and is under `fresh_for` seconds old. Blocking: database and file IO."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    heads = _unrecorded_heads(settings, fresh_for, now_ms)
    if heads is None:
        return None
    checkpoint = checkpoint_key(settings, create=True).sign(heads, at=now_ms)
    append_checkpoint(checkpoint_file(settings), checkpoint)
    return checkpoint


def start_checkpoint_needed(settings: Settings, fresh_for: float) -> bool:
    """Whether `take_start_checkpoint` would sign now. Loads no signing library. Blocking."""
    return _unrecorded_heads(settings, fresh_for, int(time.time() * 1000)) is not None


def _unrecorded_heads(settings: Settings, fresh_for: float, now_ms: int) -> dict[str, Head] | None:
    """The chains' heads, or None when the file's last checkpoint records them and is under
    `fresh_for` seconds old."""
    heads = heads_of_database(chains_url(settings))
    try:
        last = last_checkpoint(checkpoint_file(settings))
    except CheckpointError:
        last = None  # not a checkpoint: sign a fresh one (the doctor reports the file)
    if last is not None and last.heads == heads and 0 <= now_ms - last.time < fresh_for * 1000:
        return None
    return heads


async def checkpoint_periodically(settings: Settings) -> None:
    """Take a checkpoint now (unless the last one already makes it) and then every
    `audit.checkpoint_interval` seconds (0: never)."""
    interval = settings.config.audit.checkpoint_interval
    if not interval:
        return
    take: Callable[[], Checkpoint | None] = functools.partial(take_start_checkpoint, settings, interval)
    while True:
        try:
            checkpoint = await asyncio.to_thread(take)
        except (AuditDatabaseError, CheckpointError, OSError) as exc:
            log.warning("Audit checkpoint failed (next try in %g s): %s", interval, exc)
        else:
            if checkpoint is None:  # nothing to say at info: `serve` may have just signed it
                log.debug(
                    "Audit checkpoint not needed: the last one, under %g s old, has these heads", interval
                )
            else:
                log.info("Audit checkpoint of %d chain(s) written", len(checkpoint.heads))
        take = functools.partial(take_checkpoint, settings)
        await asyncio.sleep(interval)
