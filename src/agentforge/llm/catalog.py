"""The bundled model catalogue: limits and list prices of well-known models, from `catalog.json`.

A dated data file rather than code, so refreshing prices is a data change; a model configured under the
same provider overrides any field (see `provider.ProviderCatalog`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

CATALOG_FILE = "catalog.json"


@dataclass(frozen=True, slots=True)
class Cost:
    """USD per 1M tokens. `over_200k`: the prices of a request whose prompt (input plus cache reads
    and writes) exceeds 200K tokens, where the provider charges a higher tier for the whole request."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    over_200k: Cost | None = None


@dataclass(frozen=True, slots=True)
class CatalogModel:
    name: str
    context: int
    output: int
    cost: Cost
    input: int | None = None


@dataclass(frozen=True, slots=True)
class Catalog:
    updated: str  # ISO date the prices and limits were last checked
    provider_names: dict[str, str]
    models: dict[str, dict[str, CatalogModel]]  # provider id → model id → entry


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _LimitEntry(_Strict):
    context: int = Field(gt=0)
    output: int = Field(gt=0)
    input: int | None = Field(default=None, gt=0)


class _TierEntry(_Strict):
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    cache_write: float = Field(default=0.0, ge=0)


class _CostEntry(_TierEntry):
    context_over_200k: _TierEntry | None = None


class _ModelEntry(_Strict):
    name: str
    limit: _LimitEntry
    cost: _CostEntry


class _ProviderEntry(_Strict):
    name: str
    models: dict[str, _ModelEntry]


class _CatalogFile(_Strict):
    updated: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    source: str
    unit: str
    providers: dict[str, _ProviderEntry]


def parse_catalog(text: str | bytes) -> Catalog:
    """A catalogue from the file's JSON text; a malformed file fails loudly (pydantic ValidationError)."""
    data = _CatalogFile.model_validate_json(text)
    return Catalog(
        updated=data.updated,
        provider_names={pid: provider.name for pid, provider in data.providers.items()},
        models={
            pid: {mid: _model(entry) for mid, entry in provider.models.items()}
            for pid, provider in data.providers.items()
        },
    )


@cache
def bundled_catalog() -> Catalog:
    """The catalogue shipped inside the package (read once per process)."""
    return parse_catalog(resources.files(__package__).joinpath(CATALOG_FILE).read_bytes())


def _model(entry: _ModelEntry) -> CatalogModel:
    cost = entry.cost
    return CatalogModel(
        name=entry.name,
        context=entry.limit.context,
        output=entry.limit.output,
        input=entry.limit.input,
        cost=Cost(cost.input, cost.output, cost.cache_read, cost.cache_write, _tier(cost.context_over_200k)),
    )


def _tier(entry: _TierEntry | None) -> Cost | None:
    if entry is None:
        return None
    return Cost(entry.input, entry.output, entry.cache_read, entry.cache_write)
