"""Shared fixtures: the fake provider and a real server process-in-loop speaking HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.databases import database_url, empty_database_url
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.fixtures import fake_anthropic, fake_openai
from tests.fakes.openai_server import FakeOpenAI

__all__ = ["database_url", "empty_database_url", "fake_anthropic", "fake_openai", "live"]


@pytest_asyncio.fixture
async def live(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str) -> AsyncIterator[LiveServer]:
    """The real app served by uvicorn on a free loopback port, with the fake provider, once on
    SQLite and once on Postgres."""
    async with start_live_server(tmp_path, fake_openai, database_url=database_url) as server:
        yield server
