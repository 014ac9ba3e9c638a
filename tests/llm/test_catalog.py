"""The bundled, dated model catalogue (`llm/catalog.json`) and how the config overrides it."""

from __future__ import annotations

import datetime
import json
from importlib import resources
from typing import Any

import pytest
from pydantic import ValidationError

from agentforge.config import Config
from agentforge.llm.catalog import CATALOG_FILE, bundled_catalog, parse_catalog
from agentforge.llm.provider import Cost, ProviderCatalog
from agentforge.llm.stall import DEFAULT_CHUNK_TIMEOUT


def test_catalogue_is_dated_and_covers_the_three_big_providers() -> None:
    catalogue = bundled_catalog()
    assert datetime.date.fromisoformat(catalogue.updated) <= datetime.date.today()
    assert {"openai", "anthropic", "google"} <= set(catalogue.models)
    for models in catalogue.models.values():
        assert models
        for model in models.values():
            assert model.context > 0 and 0 < model.output <= model.context
            assert model.cost.input > 0 and model.cost.output >= model.cost.input
            assert model.cost.cache_read < model.cost.input


def test_known_list_prices() -> None:
    models = bundled_catalog().models
    assert models["openai"]["gpt-4o"].cost == Cost(2.5, 10.0, 1.25, 0.0)
    assert models["anthropic"]["claude-sonnet-4-5"].cost == Cost(
        3.0, 15.0, 0.3, 3.75, Cost(6.0, 22.5, 0.6, 7.5)
    )
    assert models["google"]["gemini-2.5-pro"].cost.over_200k == Cost(2.5, 15.0, 0.625, 0.0)
    assert models["google"]["gemini-2.5-pro"].context == 1_048_576


def _raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("agentforge.llm").joinpath(CATALOG_FILE).read_text())
    return data


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d.pop("updated"),
        lambda d: d.update(updated="last week"),
        lambda d: d["providers"]["openai"]["models"]["gpt-4o"]["cost"].update(input=-1),
        lambda d: d["providers"]["openai"]["models"]["gpt-4o"]["limit"].pop("context"),
        lambda d: d["providers"]["openai"]["models"]["gpt-4o"].update(prise=1),  # a typo'd key
    ],
)
def test_a_malformed_catalogue_fails_loudly(breakage: Any) -> None:
    data = _raw()
    breakage(data)
    with pytest.raises(ValidationError):
        parse_catalog(json.dumps(data))


def test_config_overrides_catalogue_fields_one_by_one() -> None:
    config = {
        "provider": {
            "openai": {
                "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "sk", "chunkTimeout": 5},
                "models": {"gpt-4o": {"cost": {"input": 1.0}, "limit": {"output": 1000}}},
            }
        }
    }
    model = ProviderCatalog(Config.model_validate(config), env={}).resolve("openai", "gpt-4o")
    assert model.cost == Cost(input=1.0, output=10.0, cache_read=1.25)
    assert (model.limit_context, model.limit_output) == (128_000, 1000)
    assert model.chunk_timeout == 5


def test_config_overrides_the_long_prompt_tier_field_by_field() -> None:
    config = {
        "provider": {
            "anthropic": {
                "options": {"apiKey": "sk"},
                "models": {"claude-sonnet-4-5": {"cost": {"context_over_200k": {"output": 30.0}}}},
            },
            "openai": {
                "options": {"apiKey": "sk"},
                "models": {"gpt-4o": {"cost": {"context_over_200k": {"input": 5.0}}}},
            },
        }
    }
    catalog = ProviderCatalog(Config.model_validate(config), env={})
    sonnet = catalog.resolve("anthropic", "claude-sonnet-4-5")
    assert sonnet.cost.over_200k == Cost(6.0, 30.0, 0.6, 7.5)
    # A model without a catalogued tier gets one whose unset prices are its base prices.
    assert catalog.resolve("openai", "gpt-4o").cost.over_200k == Cost(5.0, 10.0, 1.25, 0.0)
    listed = {p.id: p for p in catalog.providers()}["anthropic"].models["claude-sonnet-4-5"]
    assert listed.cost.context_over_200k is not None and listed.cost.context_over_200k.output == 30.0


def test_chunk_timeout_defaults_to_two_minutes() -> None:
    model = ProviderCatalog(Config(), env={"OPENAI_API_KEY": "sk"}).resolve("openai", "gpt-4o")
    assert model.chunk_timeout == DEFAULT_CHUNK_TIMEOUT == 120
