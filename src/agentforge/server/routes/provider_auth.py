"""`GET /provider/auth` (opencode's login methods per provider): none, because providers are reached
with the keys in the server's config, never with credentials a client logs in with."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.server.responses import WireResponse

router = APIRouter(tags=["provider"])


@router.get("/provider/auth", operation_id="provider.auth")
async def provider_auth() -> WireResponse:
    return WireResponse({})
