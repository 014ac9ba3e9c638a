"""Status routes opencode's clients poll for tooling this server does not run: language servers
(`/lsp`) and formatters (`/formatter`). Both answer an empty list: none is configured or running."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.server.responses import WireResponse

router = APIRouter(tags=["lsp"])


@router.get("/lsp", operation_id="lsp.status")
async def lsp_status() -> WireResponse:
    """Language servers: none run here."""
    return WireResponse([])


@router.get("/formatter", operation_id="formatter.status")
async def formatter_status() -> WireResponse:
    """Formatters: none run here (tools write files as the model gives them)."""
    return WireResponse([])
