"""`GET /config` and `PATCH /config` (opencode's config routes).

GET answers the caller's effective config as a client needs it, never what could hold a secret:
models, agents, commands, permission rules, instructions, and per provider only its name and
models (no options: they hold API keys and headers); MCP servers by name and kind only. Sharing is
reported disabled and updates off, because this server offers neither.

PATCH is refused: the config is the operator's files (and a tenant's overlay file), read at start-up
and audited by digest; a client cannot rewrite it over HTTP.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agentforge.config import Config
from agentforge.server.deps import IdentityDep, RuntimeDep, TenantDep
from agentforge.server.errors import ApiError
from agentforge.server.responses import WireResponse

router = APIRouter(tags=["config"])

# Keys copied as they are: none of them can hold a secret.
_PLAIN_KEYS = ("model", "small_model", "default_agent", "permission", "instructions", "command", "agent")
_MODEL_KEYS = ("name", "limit", "variants")
PATCH_REFUSED = (
    "The config cannot be changed over HTTP: it is the server's agentforge.json (and, for a tenant, "
    "its overlay), which the operator edits and the server reads at start-up."
)


def client_config(config: Config, username: str) -> dict[str, Any]:
    """What a client may see of `config` (see the module docstring)."""
    raw = config.model_dump(mode="json", by_alias=True, exclude_none=True)
    view: dict[str, Any] = {key: raw[key] for key in _PLAIN_KEYS if raw.get(key) is not None}
    view["username"] = username
    view["share"] = "disabled"
    view["autoupdate"] = False
    view["snapshot"] = raw.get("snapshot", True) is not False
    view["provider"] = {
        provider_id: {
            "name": provider.get("name") or provider_id,
            "models": {
                model_id: {key: model[key] for key in _MODEL_KEYS if model.get(key)}
                for model_id, model in (provider.get("models") or {}).items()
            },
        }
        for provider_id, provider in (raw.get("provider") or {}).items()
    }
    servers = raw.get("mcp") or {}
    view["mcp"] = {
        name: {"type": entry.get("type"), "enabled": entry.get("enabled", True) is not False}
        for name, entry in servers.items()
        if isinstance(entry, dict)
    }
    return view


@router.get("/config", operation_id="config.get", summary="The caller's effective config, without secrets")
async def get_config(rt: RuntimeDep, tenant_id: TenantDep, caller: IdentityDep) -> WireResponse:
    scope = await rt.scope(tenant_id)
    return WireResponse(client_config(scope.settings.config, caller.user))


@router.patch(
    "/config",
    operation_id="config.update",
    responses={403: {"description": "The config cannot be changed over HTTP"}},
    summary="Refused: the config is the operator's",
)
async def update_config() -> WireResponse:
    raise ApiError(403, "ForbiddenError", PATCH_REFUSED)
