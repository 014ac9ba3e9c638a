"""opencode's session extras: `/init` (have the agent write the workspace's AGENTS.md) and `/share`
(refused: sessions are never published from this server)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from agentforge.model.base import Wire
from agentforge.model.session import Session
from agentforge.server.deps import PromptDep, SessionsDep
from agentforge.server.errors import ApiError
from agentforge.server.responses import WireResponse
from agentforge.session.inputs import ModelInput, PromptInput, TextPartInput

router = APIRouter(prefix="/session", tags=["session"])

SHARING_DISABLED = (
    "Sharing is disabled: Agent Forge keeps sessions on this server (and its tenant) and never "
    "publishes them to a share service."
)
INIT_PROMPT = """Look through this workspace and write an AGENTS.md file at its root for coding agents \
that will work here later. Keep it short and factual, and cover:

- how to install dependencies, build, lint and run the tests (including how to run a single test);
- how the code is laid out, and the conventions it follows (naming, formatting, error handling, \
imports, types) as you see them in the code;
- anything surprising a newcomer would otherwise get wrong.

If an AGENTS.md already exists, improve it rather than starting over. Take into account any existing \
instructions for agents (CLAUDE.md, .cursor/rules/, .cursorrules, .github/copilot-instructions.md)."""


class InitInput(Wire):
    model_id: str = Field(alias="modelID", min_length=1)
    provider_id: str = Field(alias="providerID", min_length=1)
    message_id: str | None = Field(default=None, alias="messageID")


_SHARE: dict[int | str, dict[str, Any]] = {403: {"description": "Sharing is disabled on this server"}}


@router.post("/{session_id}/init", operation_id="session.init", responses={200: {"model": bool}})
async def init(session_id: str, body: InitInput, prompts: PromptDep) -> WireResponse:
    """Run a turn that has the agent write (or improve) the workspace's AGENTS.md."""
    prompt = PromptInput(
        message_id=body.message_id,
        model=ModelInput(provider_id=body.provider_id, model_id=body.model_id),
        parts=[TextPartInput(type="text", text=INIT_PROMPT)],
    )
    await prompts.prompt(session_id, prompt)
    return WireResponse(True)


@router.post("/{session_id}/share", operation_id="session.share", responses=_SHARE)
async def share(session_id: str, sessions: SessionsDep) -> WireResponse:
    await sessions.get(session_id)
    raise ApiError(403, "ForbiddenError", SHARING_DISABLED)


@router.delete("/{session_id}/share", operation_id="session.unshare", responses={200: {"model": Session}})
async def unshare(session_id: str, sessions: SessionsDep) -> WireResponse:
    """Nothing is ever shared, so there is nothing to take back: the session as it is."""
    return WireResponse(await sessions.get(session_id))
