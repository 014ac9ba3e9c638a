"""`POST /session/{id}/summarize`: manual compaction, then the loop (KERNEL 1.1)."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.server.deps import PromptDep
from agentforge.server.responses import WireResponse
from agentforge.session.context.summarize import SummarizeInput, summarize

router = APIRouter(prefix="/session", tags=["session"])


@router.post(
    "/{session_id}/summarize",
    operation_id="session.summarize",
    summary="Compact the session's history, then run the loop",
)
async def summarize_session(session_id: str, body: SummarizeInput, prompts: PromptDep) -> WireResponse:
    await summarize(prompts, session_id, body)
    return WireResponse(True)
