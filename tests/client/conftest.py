"""The real app, in-process, behind the SDK: fixtures for the client tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastapi import FastAPI

from agentforge.client import AsyncAgentForge, StreamingASGITransport
from agentforge.config import Settings, load_settings
from agentforge.server.app import create_app
from tests.fakes.openai_server import FakeOpenAI

BASE_URL = "http://forge.test"


def fake_provider_config(fake: FakeOpenAI) -> dict[str, Any]:
    return {
        "model": "fake/m",
        "provider": {
            "fake": {
                "api": "openai",
                "options": {"baseURL": fake.base_url, "apiKey": "k"},
                "models": {"m": {"limit": {"context": 100000, "output": 4000}}},
            }
        },
        # Title generation would take a scripted reply out of turn.
        "title": False,
    }


@pytest.fixture
def settings(tmp_path: Path, fake_openai: FakeOpenAI) -> Settings:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return load_settings(
        data_dir=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'forge.db'}",
        directory=workspace,
        config_override=fake_provider_config(fake_openai),
    )


@pytest.fixture
def app(settings: Settings) -> FastAPI:
    return create_app(settings)


@pytest_asyncio.fixture
async def forge(app: FastAPI) -> AsyncIterator[AsyncAgentForge]:
    transport = StreamingASGITransport(app)
    async with transport.lifespan(), AsyncAgentForge(BASE_URL, transport=transport) as client:
        yield client
