"""Fixtures for the model-adapter tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from agentforge.llm.openai_chat import close_clients
from tests.fakes.fixtures import fake_openai

__all__ = ["fake_openai"]  # also registered by tests/conftest.py; here so this package stands alone


@pytest_asyncio.fixture(autouse=True)
async def _close_pooled_clients() -> AsyncIterator[None]:
    """Each test has its own event loop; close the clients pooled on it so no socket outlives it."""
    yield
    await close_clients()
