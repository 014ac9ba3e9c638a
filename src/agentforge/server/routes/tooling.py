"""Routes opencode's clients poll for tooling this server does not run: language servers (`/lsp`),
formatters (`/formatter`) and skills (`/skill`). Each answers an empty list: none is configured or
running."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.server.responses import WireResponse

router = APIRouter(tags=["tooling"])


@router.get("/lsp", operation_id="lsp.status")
async def lsp_status() -> WireResponse:
    """Language servers: none run here."""
    return WireResponse([])


@router.get("/formatter", operation_id="formatter.status")
async def formatter_status() -> WireResponse:
    """Formatters: none run here (tools write files as the model gives them)."""
    return WireResponse([])


@router.get("/skill", operation_id="app.skills")
async def skills() -> WireResponse:
    """Skills (packaged instructions an agent loads on demand): none are offered here."""
    return WireResponse([])
