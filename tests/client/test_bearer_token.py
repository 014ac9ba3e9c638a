"""The SDK sends a bearer token: `token=`, its alias `api_key=`, or AGENTFORGE_API_KEY."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentforge.client import AgentForge, AgentForgeError, AsyncAgentForge, routes
from tests.e2e.harness import fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI
from tests.identity.keys import AUDIENCE, HS_SECRET, ISSUER, hs_token


def test_token_and_api_key_are_one_setting() -> None:
    assert routes.resolve_token("a", None, from_env=False) == "a"
    assert routes.resolve_token(None, "b", from_env=False) == "b"
    assert routes.resolve_token("c", "c", from_env=False) == "c"
    with pytest.raises(ValueError, match="not both"):
        routes.resolve_token("a", "b", from_env=False)


def test_the_environment_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(routes.ENV_API_KEY, "from-env")
    assert routes.resolve_token(None, None, from_env=True) == "from-env"
    assert routes.resolve_token("explicit", None, from_env=True) == "explicit"
    assert routes.resolve_token(None, None, from_env=False) is None
    monkeypatch.setenv(routes.ENV_API_KEY, "")
    assert routes.resolve_token(None, None, from_env=True) is None


async def test_clients_authenticate_against_a_server_that_requires_it(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(routes.ENV_API_KEY, raising=False)
    config = {
        **fake_provider_config(fake_openai),
        "auth": {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "secret": HS_SECRET}},
    }
    async with start_live_server(tmp_path, fake_openai, config) as live:
        async with AsyncAgentForge(live.url) as anonymous:
            with pytest.raises(AgentForgeError) as refused:
                await anonymous.list_sessions()
            assert refused.value.status == 401
        async with AsyncAgentForge(live.url, api_key=hs_token()) as with_key:
            assert await with_key.list_sessions() == []
        monkeypatch.setenv(routes.ENV_API_KEY, hs_token(sub="env-user"))
        async with AsyncAgentForge(live.url) as from_env:
            created = await from_env.create_session(title="env")

        def sync_read() -> str:
            with AgentForge(live.url) as client:
                return client.get_session(created.id).title

        assert await asyncio.to_thread(sync_read) == "env"
