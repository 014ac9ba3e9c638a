"""What `agentforge serve` does once before serving, in a short-lived child process: bring the
database to the newest schema, audit the config it starts with, and sign the start's audit checkpoint.

These are one-off and heavy in memory: Alembic with its migration scripts (~11 MB) and the signing
library (~8 MB) would stay resident in the server for as long as it runs. A start with nothing to do
(a restart: the schema at head, the last checkpoint recent and recording these heads) starts no child.
The child is only a saving: whatever it did not do, the server does itself as before (`Store.open`
migrates, the runtime audits the config, the checkpoint task signs), with the same errors. A database
migrated by its owner (`database.owner_url`: the grants to the runtime role go with it) is left to
the store.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from agentforge.config import Settings
from agentforge.identity.model import SYSTEM_TENANT
from agentforge.model.events import SYSTEM_ACTOR
from agentforge.runtime.checkpoints import start_checkpoint_needed, take_start_checkpoint
from agentforge.store.audit import digest
from agentforge.store.audit_verify import AuditDatabaseError, read_database
from agentforge.store.engine import parse_database_url
from agentforge.store.migrate import HEAD_REVISION, current_revision, upgrade_to_head
from agentforge.store.store import Store

log = logging.getLogger(__name__)


def prepare_in_child(settings: Settings) -> bool:
    """Prepare in a child process when there is anything to do (whether one ran). Blocking: call it
    before the server's event loop runs."""
    if not _needs_preparing(settings):
        return False
    # "spawn": a fresh interpreter, so the child's imports stay in the child.
    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            done = pool.submit(prepare, settings).result()
    except Exception as exc:
        log.debug("Preparing in a child process failed (%s); the server prepares itself", exc)
        return True
    for line in done:
        log.info(line)
    return True


def prepare(settings: Settings) -> list[str]:
    """In the child: migrate, audit the config, sign the start checkpoint. What it did, as log
    lines; it stops at the first failure (the server repeats that step and reports it)."""
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
        asyncio.run(_record_config(settings))  # the server then finds it recorded: no new head
        interval = settings.config.audit.checkpoint_interval
        if interval and (checkpoint := take_start_checkpoint(settings, interval)) is not None:
            done.append(f"Audit checkpoint of {len(checkpoint.heads)} chain(s) written")
    except Exception:
        pass
    return done


async def record_config(store: Store, settings: Settings) -> None:
    """Audit: the effective config's digest (never its values: they hold secrets), when changed."""
    await store.record_config_loaded(
        SYSTEM_TENANT,
        digest(settings.config.model_dump(mode="json")),
        [str(path) for path in settings.config_sources],
        actor=SYSTEM_ACTOR,
    )


async def _record_config(settings: Settings) -> None:
    store = await Store.open(settings.database_url)
    try:
        await record_config(store, settings)
    finally:
        await store.close()


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
