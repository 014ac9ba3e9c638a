"""The `store` fixture, once per dialect (over `database_url`, from tests/databases.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentforge.model.events import Event
from agentforge.store import Store


@pytest.fixture
def published() -> list[Event]:
    """Every batch the store publishes, flattened in publish order."""
    return []


@pytest.fixture
async def store(database_url: str, published: list[Event]) -> AsyncIterator[Store]:
    opened = await Store.open(database_url, publish=published.extend)
    try:
        yield opened
    finally:
        await opened.close()
