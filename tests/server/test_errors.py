"""Errors the server maps to a status (server/errors.py): a config problem found only when used
names itself instead of ending as an anonymous 500."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI


async def test_a_provider_option_misspelt_in_the_config_is_named_in_the_answer(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    options = config["provider"]["fake"]["options"]
    options["baseUrl"] = options.pop("baseURL")
    async with start_live_server(tmp_path, fake_openai, config) as live:
        session = await live.create_session()
        answer = await live.prompt(session["id"], "hi")
    assert answer.status_code == 500
    assert answer.json()["name"] == "ConfigError"
    assert "options.baseURL" in answer.json()["data"]["message"]
