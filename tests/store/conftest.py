"""The `store` fixture, once per dialect (over `database_url`, from tests/databases.py).

On Postgres the store opens the way a deployment runs it: as the runtime role (bound by row-level
security), with the owner's URL for migrations, grants and cross-tenant maintenance reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentforge.model.events import Event
from agentforge.store import Store
from tests.databases import owner_url_for


@pytest.fixture
def published() -> list[Event]:
    """Every batch the store publishes, flattened in publish order."""
    return []


@pytest.fixture
async def store(database_url: str, published: list[Event]) -> AsyncIterator[Store]:
    opened = await Store.open(database_url, owner_url=owner_url_for(database_url), publish=published.extend)
    try:
        yield opened
    finally:
        await opened.close()
