"""Audit: the config a server starts with, as the digest of its effective values (never the values:
they hold secrets), recorded when it changed since the last one recorded."""

from __future__ import annotations

from agentforge.config import Settings
from agentforge.identity.model import SYSTEM_TENANT
from agentforge.model.events import SYSTEM_ACTOR
from agentforge.store.audit import digest
from agentforge.store.store import Store


async def record_config(store: Store, settings: Settings) -> None:
    """`config.loaded` in the `_system` chain unless the last one there has the same digest."""
    await store.record_config_loaded(
        SYSTEM_TENANT,
        digest(settings.config.model_dump(mode="json")),
        [str(path) for path in settings.config_sources],
        actor=SYSTEM_ACTOR,
    )


async def record_loaded_config(settings: Settings) -> None:
    """The same through a store of its own, opened and closed here (before a server opens its own)."""
    store = await Store.open(settings.database_url)
    try:
        await record_config(store, settings)
    finally:
        await store.close()
