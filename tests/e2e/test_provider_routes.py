"""`GET /provider` and `GET /config/providers` (KERNEL 1.4): the catalogue clients see, no credentials."""

from __future__ import annotations

from tests.e2e.harness import LiveServer


async def test_provider_lists_configured_and_catalogue_providers_without_keys(live: LiveServer) -> None:
    response = await live.client.get("/provider")
    assert response.status_code == 200
    assert "sk-test" not in response.text and "apiKey" not in response.text
    body = response.json()
    assert "fake" in body["connected"]
    assert body["default"]["fake"] == "test-model"
    providers = {p["id"]: p for p in body["all"]}
    fake = providers["fake"]
    assert fake["source"] == "config" and fake["api"] == "openai"
    assert fake["models"]["test-model"]["limit"] == {"context": 128_000, "output": 4096}
    # The rest of the bundled catalogue is listed too, with limits and prices.
    assert {"openai", "anthropic", "google"} <= set(providers)
    sonnet = providers["anthropic"]["models"]["claude-sonnet-4-5"]
    assert sonnet["providerID"] == "anthropic"
    assert sonnet["limit"]["context"] == 200_000
    assert sonnet["cost"] == {
        "input": 3.0,
        "output": 15.0,
        "cache_read": 0.3,
        "cache_write": 3.75,
        "context_over_200k": {"input": 6.0, "output": 22.5, "cache_read": 0.6, "cache_write": 7.5},
    }
    assert set(body["connected"]) <= set(providers) and set(body["default"]) == set(body["connected"])


async def test_config_providers_lists_connected_providers_only(live: LiveServer) -> None:
    response = await live.client.get("/config/providers")
    assert response.status_code == 200
    assert "sk-test" not in response.text
    body = response.json()
    ids = [p["id"] for p in body["providers"]]
    assert "fake" in ids and "google" not in ids
    assert all(p["source"] != "catalog" for p in body["providers"])
    assert body["default"]["fake"] == "test-model"


async def test_unknown_provider_names_the_close_match(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    response = await live.prompt(sid, "hi", model={"providerID": "fak", "modelID": "test-model"})
    assert response.status_code == 400
    assert "Provider not found: fak" in response.json()["data"]["message"]
    assert "Did you mean: fake" in response.json()["data"]["message"]
