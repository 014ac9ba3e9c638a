"""Providers and models: what `provider/model` means, where to send it, its limits and its prices.

Providers come from the config file (`provider.<id>`) plus well-known ones that work from their usual
environment variable alone (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`). Only models the catalogue knows can
be resolved: a configured model, or one from the built-in table of a well-known provider.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from agentforge.config import (
    Config,
    ConfigError,
    ModelConfig,
    ModelCost,
    ModelCostTier,
    ProviderConfig,
    ProviderOptions,
)
from agentforge.llm.catalog import CatalogModel, bundled_catalog
from agentforge.llm.catalog import Cost as Cost  # re-exported: callers import it from here
from agentforge.llm.stall import DEFAULT_CHUNK_TIMEOUT
from agentforge.model.provider import (  # the wire shapes, shared with the SDK
    ModelCostInfo as ModelCostInfo,
)
from agentforge.model.provider import (
    ModelCostTierInfo as ModelCostTierInfo,
)
from agentforge.model.provider import (
    ModelInfo as ModelInfo,
)
from agentforge.model.provider import (
    ModelLimitInfo as ModelLimitInfo,
)
from agentforge.model.provider import (
    ProviderInfo as ProviderInfo,
)

_T = TypeVar("_T")

SUGGESTION_CUTOFF = 0.6  # difflib similarity above which an id is offered as "Did you mean"


# APIs whose SDK derives the endpoint from the cloud region, so `baseURL` is optional.
CLOUD_APIS = ("anthropic-bedrock", "anthropic-vertex")
# Provider `options` keys of `CloudOptions`, by field.
_CLOUD_OPTION_KEYS = {
    "region": "region",
    "project": "project",
    "profile": "profile",
    "access_key_id": "accessKeyId",
    "secret_access_key": "secretAccessKey",
    "session_token": "sessionToken",
}


@dataclass(frozen=True, slots=True)
class CloudOptions:
    """Where and as whom to call a model hosted on a cloud platform (Anthropic on Amazon Bedrock or
    Google Vertex AI), from provider options. Unset fields fall back to the platform's own environment
    variables and config files; secrets never appear in `repr`."""

    region: str | None = None  # AWS region / Vertex location
    project: str | None = None  # Google Cloud project (Vertex)
    profile: str | None = None  # AWS shared-config profile (Bedrock)
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def has_aws_credentials(self) -> bool:
        return any((self.access_key_id, self.secret_access_key, self.session_token, self.profile))


class UnknownModelError(Exception):
    """A provider or model id that the catalogue does not know, with close matches when there are any."""

    def __init__(self, message: str, *, suggestions: list[str] | None = None) -> None:
        self.suggestions = suggestions or []
        if self.suggestions:
            message = f"{message}. Did you mean: {', '.join(self.suggestions)}?"
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """Everything an adapter needs to call one model. `api_key` never appears in `repr`."""

    provider_id: str
    model_id: str
    api: str
    base_url: str
    api_key: str
    headers: dict[str, str]
    timeout: float | None
    limit_context: int
    limit_output: int
    limit_input: int | None
    cost: Cost = field(default_factory=Cost)
    options: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    api_model_id: str | None = None  # sent as `model` when the provider's id differs from ours
    requires_key: bool = False  # the provider rejects requests without a key (a well-known endpoint)
    chunk_timeout: float = DEFAULT_CHUNK_TIMEOUT  # seconds of stream silence before the attempt fails
    api_version: str | None = None  # provider `options.apiVersion` (Azure OpenAI's `api-version`)
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> options over `options`
    cloud: CloudOptions = field(default_factory=CloudOptions)  # Bedrock / Vertex region and credentials

    @property
    def request_model(self) -> str:
        return self.api_model_id or self.model_id

    def __repr__(self) -> str:
        # Header values may be credentials too (x-api-key, Authorization): show names only.
        return (
            f"ResolvedModel(provider_id={self.provider_id!r}, model_id={self.model_id!r}, api={self.api!r}, "
            f"base_url={self.base_url!r}, api_key={'***' if self.api_key else ''!r}, "
            f"headers={sorted(self.headers)!r}, timeout={self.timeout!r}, "
            f"limit_context={self.limit_context}, limit_output={self.limit_output}, "
            f"limit_input={self.limit_input}, cost={self.cost!r}, options={self.options!r})"
        )


@dataclass(frozen=True, slots=True)
class _WellKnownProvider:
    id: str
    name: str
    env_key: str
    base_url: str
    default_model: str
    api: str


WELL_KNOWN_PROVIDERS: dict[str, _WellKnownProvider] = {
    "openai": _WellKnownProvider(
        "openai", "OpenAI", "OPENAI_API_KEY", "https://api.openai.com/v1", "gpt-4o", "openai"
    ),
    "anthropic": _WellKnownProvider(
        "anthropic",
        "Anthropic",
        "ANTHROPIC_API_KEY",
        "https://api.anthropic.com",
        "claude-sonnet-4-5",
        "anthropic",
    ),
}

# Limits and list prices of well-known models (`catalog.json`, dated). A model configured under the
# same provider overrides any of these fields.
BUILTIN_MODELS: dict[str, dict[str, CatalogModel]] = bundled_catalog().models
# The wire protocol each catalogue provider speaks natively (its `api` config value).
CATALOG_PROVIDER_APIS = {"openai": "openai", "anthropic": "anthropic", "google": "google"}


@dataclass(slots=True)
class _Provider:
    id: str
    name: str
    api: str
    source: Literal["config", "env"]
    base_url: str | None
    api_key: str
    headers: dict[str, str]
    timeout: float | None
    requires_key: bool
    models: dict[str, _ModelSpec]
    chunk_timeout: float = DEFAULT_CHUNK_TIMEOUT
    api_version: str | None = None
    cloud: CloudOptions = field(default_factory=CloudOptions)


@dataclass(frozen=True, slots=True)
class _ModelSpec:
    """One model of a provider, before it is combined with the provider's endpoint and credentials."""

    name: str
    context: int
    output: int
    input: int | None
    cost: Cost
    options: dict[str, Any]
    headers: dict[str, str]
    api_model_id: str | None = None
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProviderCredential:
    """Whether a connected provider has a key (never the key itself), for deployment checks."""

    provider_id: str
    api: str
    base_url: str | None
    has_key: bool
    options: dict[str, Any]


class ProviderCatalog:
    """The providers and models this server can call."""

    def __init__(self, config: Config, env: Mapping[str, str] = os.environ) -> None:
        self._config = config
        self._env = env
        self._providers: dict[str, _Provider] = {}
        for provider_id, provider_config in config.provider.items():
            self._providers[provider_id] = self._configured(provider_id, provider_config)
        for provider_id, known in WELL_KNOWN_PROVIDERS.items():
            if provider_id not in self._providers and env.get(known.env_key):
                self._providers[provider_id] = self._from_env(known)

    def providers(self) -> list[ProviderInfo]:
        """The connected providers: configured, or well-known with their key in the environment."""
        return [_provider_info(provider) for provider in self._providers.values()]

    def credentials(self) -> list[ProviderCredential]:
        """Each connected provider's endpoint and whether it has an API key."""
        return [
            ProviderCredential(
                provider.id,
                provider.api,
                provider.base_url,
                bool(provider.api_key),
                self._provider_options(provider.id),
            )
            for provider in self._providers.values()
        ]

    def _provider_options(self, provider_id: str) -> dict[str, Any]:
        configured = self._config.provider.get(provider_id)
        return dict(configured.options.model_extra or {}) if configured is not None else {}

    def all_providers(self) -> list[ProviderInfo]:
        """The connected providers, then every other provider of the bundled catalogue (not usable until
        configured or given a key)."""
        known = [
            _catalog_provider_info(provider_id, name)
            for provider_id, name in bundled_catalog().provider_names.items()
            if provider_id not in self._providers
        ]
        return [*self.providers(), *known]

    def default_models(self) -> dict[str, str]:
        """Each connected provider's default model: the config's `model` for its provider, else the
        well-known default, else the provider's first model."""
        configured = self.parse(self._config.model) if self._config.model else None
        defaults: dict[str, str] = {}
        for provider_id, provider in self._providers.items():
            known = WELL_KNOWN_PROVIDERS.get(provider_id)
            if configured is not None and configured[0] == provider_id:
                defaults[provider_id] = configured[1]
            elif provider_id in self._config.provider and self._config.provider[provider_id].models:
                defaults[provider_id] = next(iter(self._config.provider[provider_id].models))
            elif known is not None and known.default_model in provider.models:
                defaults[provider_id] = known.default_model
            elif provider.models:
                defaults[provider_id] = next(iter(provider.models))
        return defaults

    @staticmethod
    def parse(model: str) -> tuple[str, str]:
        """`"provider/model"` → `(provider, model)`; the model id may itself contain `/`."""
        provider_id, _, model_id = model.strip().partition("/")
        if not provider_id or not model_id:
            raise UnknownModelError(f"Invalid model {model!r}: expected provider/model")
        return provider_id, model_id

    def resolve(self, provider_id: str, model_id: str) -> ResolvedModel:
        provider = self._provider(provider_id)
        spec = provider.models.get(model_id)
        if spec is None:
            raise UnknownModelError(
                f"Model not found: {provider_id}/{model_id}",
                suggestions=self._close_models(provider_id, model_id),
            )
        if not provider.base_url and provider.api not in CLOUD_APIS:
            raise ConfigError(f"provider {provider_id!r} has no options.baseURL")
        return ResolvedModel(
            provider_id=provider_id,
            model_id=model_id,
            api=provider.api,
            base_url=provider.base_url or "",
            api_key=provider.api_key,
            headers={**provider.headers, **spec.headers},
            timeout=provider.timeout,
            limit_context=spec.context,
            limit_output=spec.output,
            limit_input=spec.input,
            cost=spec.cost,
            options=dict(spec.options),
            name=spec.name,
            api_model_id=spec.api_model_id,
            requires_key=provider.requires_key,
            chunk_timeout=provider.chunk_timeout,
            api_version=provider.api_version,
            variants={name: dict(options) for name, options in spec.variants.items()},
            cloud=provider.cloud,
        )

    def default_model(self) -> tuple[str, str]:
        """The config's `model`, else the first configured provider's first model, else a well-known
        provider whose key is in the environment."""
        if self._config.model:
            return self.parse(self._config.model)
        for provider_id, provider_config in self._config.provider.items():
            if provider_config.models:
                return provider_id, next(iter(provider_config.models))
            if provider_id in WELL_KNOWN_PROVIDERS:
                return provider_id, WELL_KNOWN_PROVIDERS[provider_id].default_model
        for provider_id, known in WELL_KNOWN_PROVIDERS.items():
            if provider_id in self._providers:
                return provider_id, known.default_model
        keys = " or ".join(known.env_key for known in WELL_KNOWN_PROVIDERS.values())
        raise UnknownModelError(f"No model configured: set `model` in agentforge.json, or set {keys}")

    def _provider(self, provider_id: str) -> _Provider:
        provider = self._providers.get(provider_id)
        if provider is not None:
            return provider
        known = WELL_KNOWN_PROVIDERS.get(provider_id)
        if known is not None:
            raise UnknownModelError(
                f"Provider not found: {provider_id} (set {known.env_key} or configure provider.{provider_id})"
            )
        suggestions = difflib.get_close_matches(
            provider_id, list(self._providers), n=3, cutoff=SUGGESTION_CUTOFF
        )
        raise UnknownModelError(f"Provider not found: {provider_id}", suggestions=suggestions)

    def _close_models(self, provider_id: str, model_id: str) -> list[str]:
        """Up to three "provider/model" ids whose model part is close to `model_id`, same provider first.
        (Comparing whole "provider/model" strings would rate every model of the provider as close.)"""
        scored: list[tuple[bool, float, str]] = []
        for pid, provider in self._providers.items():
            for mid in provider.models:
                ratio = difflib.SequenceMatcher(None, model_id, mid).ratio()
                if ratio >= SUGGESTION_CUTOFF:
                    scored.append((pid != provider_id, -ratio, f"{pid}/{mid}"))
        return [name for _, _, name in sorted(scored)[:3]]

    def _configured(self, provider_id: str, config: ProviderConfig) -> _Provider:
        known = WELL_KNOWN_PROVIDERS.get(provider_id)
        builtin = BUILTIN_MODELS.get(provider_id, {})
        options = config.options
        base_url = options.base_url or (known.base_url if known else None)
        models = {mid: _spec(m, None) for mid, m in builtin.items()}
        for model_id, model_config in config.models.items():
            models[model_id] = _spec(builtin.get(model_id), model_config, fallback_name=model_id)
        return _Provider(
            id=provider_id,
            name=config.name or (known.name if known else provider_id),
            api=config.api,
            source="config",
            base_url=base_url,
            api_key=options.api_key or (self._env.get(known.env_key, "") if known else ""),
            headers=dict(options.headers),
            timeout=options.timeout,
            requires_key=known is not None and base_url == known.base_url,
            models=models,
            chunk_timeout=options.chunk_timeout or DEFAULT_CHUNK_TIMEOUT,
            api_version=_api_version(options),
            cloud=_cloud_options(provider_id, options),
        )

    def _from_env(self, known: _WellKnownProvider) -> _Provider:
        return _Provider(
            id=known.id,
            name=known.name,
            api=known.api,
            source="env",
            base_url=known.base_url,
            api_key=self._env.get(known.env_key, ""),
            headers={},
            timeout=None,
            requires_key=True,
            models={mid: _spec(m, None) for mid, m in BUILTIN_MODELS.get(known.id, {}).items()},
        )


def _spec(builtin: CatalogModel | None, config: ModelConfig | None, *, fallback_name: str = "") -> _ModelSpec:
    """A configured model's fields over the built-in entry's (field by field), over zeros."""
    limit = config.limit if config is not None else None
    cost = config.cost if config is not None else None
    base_cost = builtin.cost if builtin is not None else Cost()
    return _ModelSpec(
        name=(config.name if config else None) or (builtin.name if builtin else fallback_name),
        context=_first(limit.context if limit else None, builtin.context if builtin else None, 0),
        output=_first(limit.output if limit else None, builtin.output if builtin else None, 0),
        input=limit.input if limit and limit.input is not None else (builtin.input if builtin else None),
        cost=_merged_cost(cost, base_cost),
        options=dict(config.options) if config else {},
        headers=dict(config.headers) if config else {},
        api_model_id=config.id if config else None,
        variants=dict(config.variants) if config else {},
    )


def _merged_cost(config: ModelCost | None, base: Cost) -> Cost:
    """Configured prices over the catalogue's, field by field; the long-prompt tier the same way, its
    unset fields falling back to the merged base prices."""
    merged = _merged_tier(config, base)
    tier_config = config.context_over_200k if config is not None else None
    if tier_config is None and base.over_200k is None:
        return merged
    return replace(merged, over_200k=_merged_tier(tier_config, base.over_200k or merged))


def _merged_tier(config: ModelCostTier | None, base: Cost) -> Cost:
    return Cost(
        input=_first(config.input if config else None, base.input),
        output=_first(config.output if config else None, base.output),
        cache_read=_first(config.cache_read if config else None, base.cache_read),
        cache_write=_first(config.cache_write if config else None, base.cache_write),
    )


def _api_version(options: ProviderOptions) -> str | None:
    value = (options.model_extra or {}).get("apiVersion")
    return str(value) if value else None


def _cloud_options(provider_id: str, options: ProviderOptions) -> CloudOptions:
    extra = options.model_extra or {}
    values: dict[str, str] = {}
    for name, key in _CLOUD_OPTION_KEYS.items():
        value = extra.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise ConfigError(f"provider {provider_id!r}: options.{key} must be a string")
        values[name] = value
    return CloudOptions(**values)


def _first(*values: _T | None) -> _T:
    for value in values:
        if value is not None:
            return value
    raise ValueError("no value")


def _provider_info(provider: _Provider) -> ProviderInfo:
    return ProviderInfo(
        id=provider.id,
        name=provider.name,
        api=provider.api,
        source=provider.source,
        models={
            model_id: _model_info(
                provider.id, model_id, spec.name, spec.context, spec.output, spec.input, spec.cost
            )
            for model_id, spec in provider.models.items()
        },
    )


def _catalog_provider_info(provider_id: str, name: str) -> ProviderInfo:
    return ProviderInfo(
        id=provider_id,
        name=name,
        api=CATALOG_PROVIDER_APIS.get(provider_id, "openai"),
        source="catalog",
        models={
            model_id: _model_info(provider_id, model_id, m.name, m.context, m.output, m.input, m.cost)
            for model_id, m in BUILTIN_MODELS.get(provider_id, {}).items()
        },
    )


def _model_info(
    provider_id: str, model_id: str, name: str, context: int, output: int, input: int | None, cost: Cost
) -> ModelInfo:
    return ModelInfo(
        id=model_id,
        provider_id=provider_id,
        name=name or model_id,
        limit=ModelLimitInfo(context=context, output=output, input=input),
        cost=ModelCostInfo(
            input=cost.input,
            output=cost.output,
            cache_read=cost.cache_read,
            cache_write=cost.cache_write,
            context_over_200k=_tier_info(cost.over_200k),
        ),
    )


def _tier_info(cost: Cost | None) -> ModelCostTierInfo | None:
    if cost is None:
        return None
    return ModelCostTierInfo(
        input=cost.input, output=cost.output, cache_read=cost.cache_read, cache_write=cost.cache_write
    )
