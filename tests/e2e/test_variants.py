"""Model variants (KERNEL 5.6): a prompt's `variant` merges its options over the model's."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, reply


async def test_a_variant_merges_its_options_over_the_models(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config = fake_provider_config(fake_openai)
    model = config["provider"]["fake"]["models"]["test-model"]
    model["options"] = {"reasoning_effort": "low", "metadata": {"team": "core", "tier": "base"}}
    model["variants"] = {"deep": {"reasoning_effort": "high", "metadata": {"tier": "deep"}}}
    async with start_live_server(tmp_path, fake_openai, config) as live:
        session = await live.create_session()
        live.fake.enqueue(reply("plain"), reply("deep"))
        assert (await live.prompt(session["id"], "one")).status_code == 200
        assert (await live.prompt(session["id"], "two", variant="deep")).status_code == 200
        plain, deep = live.fake.requests
        assert plain["reasoning_effort"] == "low"
        assert plain["metadata"] == {"team": "core", "tier": "base"}
        assert deep["reasoning_effort"] == "high"
        assert deep["metadata"] == {"team": "core", "tier": "deep"}

        unknown = await live.prompt(session["id"], "three", variant="turbo")
        assert unknown.status_code == 400
        assert "Unknown variant 'turbo'" in unknown.json()["data"]["message"]
        assert "deep" in unknown.json()["data"]["message"]
        history = (await live.client.get(f"/session/{session['id']}/message")).json()
        assert len(history) == 4, "a rejected prompt stores nothing"
