"""Providers and their models as `GET /provider` and `GET /config/providers` list them: the
server builds them, the SDK returns them. Never credentials."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentforge.model.base import Wire


class ModelLimitInfo(Wire):
    context: int
    output: int
    input: int | None = None


class ModelCostTierInfo(Wire):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class ModelCostInfo(ModelCostTierInfo):
    # The prices of a request whose prompt exceeds 200K tokens, for models that charge more for it.
    context_over_200k: ModelCostTierInfo | None = None


class ModelInfo(Wire):
    id: str
    provider_id: str = Field(alias="providerID")
    name: str
    limit: ModelLimitInfo
    cost: ModelCostInfo


class ProviderInfo(Wire):
    """A provider as clients see it (no credentials)."""

    id: str
    name: str
    api: str
    # "catalog": known from the bundled catalogue only, not connected (no key, not configured).
    source: Literal["config", "env", "catalog"]
    models: dict[str, ModelInfo]


class ProviderList(Wire):
    all: list[ProviderInfo] = Field(description="Connected providers, then the rest of the catalogue")
    default: dict[str, str] = Field(description="providerID → default modelID, for connected providers")
    connected: list[str] = Field(description="Providers that are configured or have their key set")


class ConfigProviders(Wire):
    providers: list[ProviderInfo]
    default: dict[str, str]
