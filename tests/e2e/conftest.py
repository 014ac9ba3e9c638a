"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e import held_prompts
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
async def held(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str) -> AsyncIterator[LiveServer]:
    """A live server whose prompts tests.e2e.held_prompts can hold just before their write."""
    config = {**fake_provider_config(fake_openai), "plugin": ["tests.e2e.held_prompts"]}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server
    held_prompts.HOLDS.clear()
