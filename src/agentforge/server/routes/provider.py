"""Provider routes (KERNEL 1.4): the model catalogue of the caller's tenant as clients see it. Never
includes credentials."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from agentforge.llm.provider import ProviderInfo
from agentforge.model.base import Wire
from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse

router = APIRouter(tags=["provider"])


class ProviderList(Wire):
    all: list[ProviderInfo] = Field(description="Connected providers, then the rest of the catalogue")
    default: dict[str, str] = Field(description="providerID → default modelID, for connected providers")
    connected: list[str] = Field(description="Providers that are configured or have their key set")


class ConfigProviders(Wire):
    providers: list[ProviderInfo]
    default: dict[str, str]


_PROVIDER_LIST: dict[int | str, dict[str, Any]] = {200: {"model": ProviderList}}
_CONFIG_PROVIDERS: dict[int | str, dict[str, Any]] = {200: {"model": ConfigProviders}}


@router.get(
    "/provider", operation_id="provider.list", responses=_PROVIDER_LIST, summary="List all known providers"
)
async def list_providers(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    catalog = (await rt.scope(tenant_id)).catalog
    connected = catalog.providers()
    return WireResponse(
        ProviderList(
            all=catalog.all_providers(),
            default=catalog.default_models(),
            connected=[provider.id for provider in connected],
        )
    )


@router.get(
    "/config/providers",
    operation_id="config.providers",
    responses=_CONFIG_PROVIDERS,
    summary="List connected providers",
)
async def config_providers(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    catalog = (await rt.scope(tenant_id)).catalog
    return WireResponse(ConfigProviders(providers=catalog.providers(), default=catalog.default_models()))
