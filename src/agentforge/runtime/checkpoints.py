"""Audit checkpoints as the server takes them: the key and file the `audit` config names, the
database role that sees every chain, and the periodic task (store/audit_checkpoints.py says what a
checkpoint is and why).

The server takes one when it starts and then every `audit.checkpoint_interval` seconds; `agentforge
audit checkpoint` takes one on demand. Reading every tenant's chain head needs a role that sees them
all: on Postgres the owner (`database.owner_url`). A checkpoint that fails is logged as a warning and
tried again at the next interval (`doctor` reports the latest one growing old).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from agentforge.config import Settings
from agentforge.store.audit_checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointKey,
    append_checkpoint,
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


async def checkpoint_periodically(settings: Settings) -> None:
    """Take a checkpoint now and then every `audit.checkpoint_interval` seconds (0: never)."""
    interval = settings.config.audit.checkpoint_interval
    if not interval:
        return
    while True:
        try:
            checkpoint = await asyncio.to_thread(take_checkpoint, settings)
        except (AuditDatabaseError, CheckpointError, OSError) as exc:
            log.warning("Audit checkpoint failed (next try in %g s): %s", interval, exc)
        else:
            log.info("Audit checkpoint of %d chain(s) written", len(checkpoint.heads))
        await asyncio.sleep(interval)
