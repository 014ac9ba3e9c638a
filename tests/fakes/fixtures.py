"""Pytest fixtures for the fakes; `tests/conftest.py` imports them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from .anthropic_server import FakeAnthropic
from .openai_server import FakeOpenAI


@pytest_asyncio.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A started fake OpenAI-compatible provider, stopped after the test."""
    async with FakeOpenAI() as fake:
        yield fake


@pytest_asyncio.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    """A started fake Anthropic Messages provider, stopped after the test."""
    async with FakeAnthropic() as fake:
        yield fake
