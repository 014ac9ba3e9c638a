"""Manual compaction: `POST /session/{id}/summarize` (KERNEL 1.1, 6.2)."""

from __future__ import annotations

from pydantic import Field

from agentforge.llm.provider import UnknownModelError
from agentforge.model.base import Wire
from agentforge.model.message import UserMessage
from agentforge.model.part import ModelRef
from agentforge.session.context.compaction import Compactor
from agentforge.session.errors import InvalidInputError
from agentforge.session.prompt import SessionPrompt
from agentforge.session.scope import TenantScope
from agentforge.session.service import SessionService

# How far back to look for the agent of the newest user message.
_RECENT_MESSAGES = 20


class SummarizeInput(Wire):
    provider_id: str = Field(alias="providerID")
    model_id: str = Field(alias="modelID")
    auto: bool = False


async def summarize(prompts: SessionPrompt, session_id: str, body: SummarizeInput) -> None:
    """Persist a compaction request with the given model, then run (or join) the loop until it has
    been handled. With `auto`, the loop goes on after the summary as an automatic compaction would."""
    prompts.services.runners.admit()  # before anything is stored
    sessions = prompts.sessions
    session = await sessions.get(session_id)
    services = sessions.services
    scope = await sessions.scope()
    try:
        scope.catalog.resolve(body.provider_id, body.model_id)
    except UnknownModelError as exc:
        raise InvalidInputError(str(exc)) from exc
    agent = await _current_agent(sessions, scope, session_id)
    model = ModelRef(provider_id=body.provider_id, model_id=body.model_id)
    request = await Compactor.for_session(services, scope, session).create(
        agent=agent, model=model, auto=body.auto
    )
    services.runners.note_input(session.id)  # a loop already running must see the request
    await prompts.run(session, request.info.id)


async def _current_agent(sessions: SessionService, scope: TenantScope, session_id: str) -> str:
    """The agent of the newest user message, else the default agent."""
    page, _ = await sessions.services.store.list_messages(
        sessions.tenant_id, session_id, limit=_RECENT_MESSAGES
    )
    for item in reversed(page):
        if isinstance(item.info, UserMessage):
            return item.info.agent
    return scope.agents.default_name
