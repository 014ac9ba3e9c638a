"""Provider routes (KERNEL 1.4): the model catalogue of the caller's tenant as clients see it. Never
includes credentials."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agentforge.model.provider import ConfigProviders, ProviderList
from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse

router = APIRouter(tags=["provider"])


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
