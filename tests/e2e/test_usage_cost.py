"""Token accounting and cost through HTTP against a catalogue model with known prices (KERNEL 5.8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script

# gpt-4o's list prices in the bundled catalogue, USD per 1M tokens.
PRICE_INPUT, PRICE_OUTPUT, PRICE_CACHE_READ = 2.5, 10.0, 1.25


async def test_two_steps_with_cached_tokens_cost_what_the_price_list_says(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    # The provider is "openai" pointed at the fake: models, limits and prices come from the catalogue.
    config = {
        "model": "openai/gpt-4o",
        "provider": {"openai": {"options": {"baseURL": fake_openai.base_url, "apiKey": "sk-test"}}},
        "title": False,
    }
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        (live.workspace / "notes.txt").write_text("remember the milk\n")
        sid = (await live.create_session())["id"]
        live.fake.enqueue(
            Script()
            .tool_call("read", {"filePath": str(live.workspace / "notes.txt")})
            .usage(1000, 200, reasoning=50, cached=400)
            .finish("tool_calls"),
            Script().text("It says: remember the milk").usage(1500, 100, cached=1200).finish(),
        )
        result = await live.prompt(sid, "what is in notes.txt?")
        assert result.status_code == 200
        history = (await live.client.get(f"/session/{sid}/message")).json()
        session = (await live.client.get(f"/session/{sid}")).json()

    # Step 1: input 1000-400 = 600, output 200-50 = 150, reasoning 50 (priced as output), cache read 400.
    step1 = (600 * PRICE_INPUT + 150 * PRICE_OUTPUT + 50 * PRICE_OUTPUT + 400 * PRICE_CACHE_READ) / 1e6
    # Step 2: input 1500-1200 = 300, output 100, cache read 1200.
    step2 = (300 * PRICE_INPUT + 100 * PRICE_OUTPUT + 1200 * PRICE_CACHE_READ) / 1e6
    assert step1 == pytest.approx(0.004) and step2 == pytest.approx(0.00325)

    # One model call = one assistant message: each carries its step's tokens and cost.
    assistants = [m for m in history if m["info"]["role"] == "assistant"]
    assert [m["info"]["cost"] for m in assistants] == [pytest.approx(step1), pytest.approx(step2)]
    assert [m["info"]["tokens"] for m in assistants] == [
        {"total": 1200, "input": 600, "output": 150, "reasoning": 50, "cache": {"read": 400, "write": 0}},
        {"total": 1600, "input": 300, "output": 100, "reasoning": 0, "cache": {"read": 1200, "write": 0}},
    ]
    steps = [p for m in assistants for p in m["parts"] if p["type"] == "step-finish"]
    assert [p["cost"] for p in steps] == [pytest.approx(step1), pytest.approx(step2)]
    assert assistants[0]["info"]["modelID"] == "gpt-4o"
    # Running totals on the session.
    assert session["cost"] == pytest.approx(step1 + step2)
    assert session["tokens"] == {
        "input": 900,
        "output": 250,
        "reasoning": 50,
        "cache": {"read": 1600, "write": 0},
    }
