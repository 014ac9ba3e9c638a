"""The provider catalogue: configured and environment-only providers, model resolution, suggestions."""

from __future__ import annotations

from typing import Any

import pytest

from agentforge.config import Config, ConfigError
from agentforge.llm.provider import BUILTIN_MODELS, CloudOptions, Cost, ProviderCatalog, UnknownModelError

LOCAL: dict[str, Any] = {
    "provider": {
        "local": {
            "api": "openai",
            "name": "Local Ollama",
            "options": {"baseURL": "http://127.0.0.1:11434/v1", "headers": {"X-Team": "core"}, "timeout": 30},
            "models": {
                "qwen": {
                    "id": "qwen2.5-coder:7b",
                    "limit": {"context": 32768, "output": 4096},
                    "cost": {"input": 0.5, "output": 1.5},
                    "options": {"num_ctx": 32768},
                    "headers": {"X-Model": "q"},
                },
                "llama": {"limit": {"context": 8192, "output": 2048, "input": 6000}},
            },
        }
    }
}


def catalog(config: dict[str, Any] | None = None, **env: str) -> ProviderCatalog:
    return ProviderCatalog(Config.model_validate(config or {}), env=env)


def test_resolve_configured_model() -> None:
    model = catalog(LOCAL).resolve("local", "qwen")

    assert (model.provider_id, model.model_id, model.api) == ("local", "qwen", "openai")
    assert model.base_url == "http://127.0.0.1:11434/v1"
    assert model.api_key == ""
    assert model.requires_key is False
    assert model.headers == {"X-Team": "core", "X-Model": "q"}
    assert model.timeout == 30
    assert (model.limit_context, model.limit_output, model.limit_input) == (32768, 4096, None)
    assert model.cost == Cost(input=0.5, output=1.5)
    assert model.options == {"num_ctx": 32768}
    assert model.request_model == "qwen2.5-coder:7b"


def test_model_input_limit_and_default_name() -> None:
    model = catalog(LOCAL).resolve("local", "llama")
    assert (model.limit_context, model.limit_output, model.limit_input) == (8192, 2048, 6000)
    assert model.request_model == "llama"
    assert model.cost == Cost()


def test_unknown_model_suggests_close_matches() -> None:
    with pytest.raises(UnknownModelError) as caught:
        catalog(LOCAL).resolve("local", "qwn")
    assert str(caught.value) == "Model not found: local/qwn. Did you mean: local/qwen?"
    assert caught.value.suggestions == ["local/qwen"]


def test_unknown_model_without_close_match() -> None:
    with pytest.raises(UnknownModelError, match=r"^Model not found: local/mistral-large$"):
        catalog(LOCAL).resolve("local", "mistral-large")


def test_unknown_provider_suggests_close_matches() -> None:
    with pytest.raises(UnknownModelError, match=r"^Provider not found: locl\. Did you mean: local\?$"):
        catalog(LOCAL).resolve("locl", "qwen")


def test_well_known_provider_without_key_says_which_variable() -> None:
    with pytest.raises(UnknownModelError, match="set OPENAI_API_KEY"):
        catalog(LOCAL).resolve("openai", "gpt-4o")


def test_unlisted_model_of_a_configured_provider_is_rejected() -> None:
    config = {"provider": {"local": {"options": {"baseURL": "http://x/v1"}, "models": {"a": {}}}}}
    with pytest.raises(UnknownModelError):
        catalog(config).resolve("local", "b")


def test_env_only_providers() -> None:
    cat = catalog(OPENAI_API_KEY="sk-openai", ANTHROPIC_API_KEY="sk-ant")

    openai_model = cat.resolve("openai", "gpt-4o")
    assert openai_model.base_url == "https://api.openai.com/v1"
    assert openai_model.api_key == "sk-openai"
    assert openai_model.requires_key is True
    assert (openai_model.limit_context, openai_model.limit_output) == (128_000, 16_384)
    assert openai_model.cost == Cost(input=2.5, output=10.0, cache_read=1.25)

    claude = cat.resolve("anthropic", "claude-sonnet-4-5")
    assert claude.api == "anthropic"  # the native Messages adapter
    assert claude.base_url == "https://api.anthropic.com"
    assert claude.api_key == "sk-ant"
    assert claude.cost.cache_write == 3.75

    ids = {info.id: info for info in cat.providers()}
    assert set(ids) == {"openai", "anthropic"}
    assert ids["openai"].source == "env"
    assert set(ids["anthropic"].models) == set(BUILTIN_MODELS["anthropic"])


def test_no_env_no_config_means_no_providers() -> None:
    cat = catalog()
    assert cat.providers() == []
    with pytest.raises(UnknownModelError, match="No model configured"):
        cat.default_model()


def test_configured_well_known_provider_overrides_builtin_fields() -> None:
    config = {"provider": {"openai": {"models": {"gpt-4o": {"limit": {"output": 8000}}, "ft:custom": {}}}}}
    cat = catalog(config, OPENAI_API_KEY="sk-env")

    model = cat.resolve("openai", "gpt-4o")
    assert (model.limit_context, model.limit_output) == (128_000, 8000)  # context kept from the table
    assert model.cost.input == 2.5
    assert model.api_key == "sk-env"
    assert model.base_url == "https://api.openai.com/v1"
    assert cat.resolve("openai", "gpt-4.1").limit_context == 1_047_576  # table models stay available
    assert cat.resolve("openai", "ft:custom").limit_context == 0
    assert next(p for p in cat.providers() if p.id == "openai").source == "config"


def test_api_key_is_hidden_in_repr() -> None:
    config = {
        "provider": {
            "p": {
                "options": {
                    "baseURL": "http://x/v1",
                    "apiKey": "sk-secret-123",
                    "headers": {"x-api-key": "hdr-secret"},
                },
                "models": {"m": {}},
            }
        }
    }
    model = catalog(config).resolve("p", "m")
    text = repr(model)
    assert model.api_key == "sk-secret-123"
    assert "sk-secret-123" not in text and "hdr-secret" not in text
    assert "x-api-key" in text and "***" in text
    assert "sk-secret-123" not in str(model)


def test_providers_list_has_no_keys() -> None:
    config = {
        "provider": {"p": {"options": {"baseURL": "http://x/v1", "apiKey": "sk-secret"}, "models": {"m": {}}}}
    }
    wire = [info.wire() for info in catalog(config).providers()]
    assert "sk-secret" not in repr(wire)
    assert wire[0]["models"]["m"]["providerID"] == "p"
    assert wire[0]["models"]["m"]["limit"] == {"context": 0, "output": 0}


def test_parse() -> None:
    assert ProviderCatalog.parse("local/qwen") == ("local", "qwen")
    assert ProviderCatalog.parse("openrouter/anthropic/claude-3.5") == ("openrouter", "anthropic/claude-3.5")
    for bad in ("qwen", "/qwen", "local/"):
        with pytest.raises(UnknownModelError):
            ProviderCatalog.parse(bad)


def test_default_model_order() -> None:
    assert catalog({**LOCAL, "model": "local/llama"}).default_model() == ("local", "llama")
    assert catalog(LOCAL, OPENAI_API_KEY="k").default_model() == ("local", "qwen")
    assert catalog(OPENAI_API_KEY="k", ANTHROPIC_API_KEY="k").default_model() == ("openai", "gpt-4o")
    assert catalog(ANTHROPIC_API_KEY="k").default_model() == ("anthropic", "claude-sonnet-4-5")


def test_custom_provider_without_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="baseURL"):
        catalog({"provider": {"p": {"models": {"m": {}}}}}).resolve("p", "m")


def test_cloud_provider_takes_region_and_credentials_from_options_and_needs_no_base_url() -> None:
    options = {"region": "us-east-1", "accessKeyId": "AKID", "secretAccessKey": "s3cr3t", "profile": ""}
    config = {"provider": {"aws": {"api": "anthropic-bedrock", "options": options, "models": {"m": {}}}}}
    model = catalog(config).resolve("aws", "m")
    assert model.base_url == ""  # the SDK derives the endpoint from the region
    assert model.cloud == CloudOptions(region="us-east-1", access_key_id="AKID", secret_access_key="s3cr3t")
    assert "s3cr3t" not in repr(model)
    vertex = {
        "api": "anthropic-vertex",
        "options": {"region": "europe-west1", "project": "p1"},
        "models": {"m": {}},
    }
    assert catalog({"provider": {"gcp": vertex}}).resolve("gcp", "m").cloud == CloudOptions(
        region="europe-west1", project="p1"
    )


def test_cloud_option_that_is_not_a_string_is_a_config_error() -> None:
    config = {
        "provider": {"aws": {"api": "anthropic-bedrock", "options": {"region": 1}, "models": {"m": {}}}}
    }
    with pytest.raises(ConfigError, match=r"options\.region must be a string"):
        catalog(config)


def test_suggestions_cross_providers_same_provider_first() -> None:
    cat = catalog(OPENAI_API_KEY="k", ANTHROPIC_API_KEY="k")
    with pytest.raises(UnknownModelError) as caught:
        cat.resolve("openai", "claude-sonnet-4-5")
    assert caught.value.suggestions[0] == "anthropic/claude-sonnet-4-5"
    with pytest.raises(UnknownModelError) as caught:
        cat.resolve("openai", "gpt-4-mini")
    assert caught.value.suggestions[0].startswith("openai/")
