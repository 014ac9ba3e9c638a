"""Title generation for new root sessions (KERNEL 4.6).

On the first step of a turn, while the session still has its default title and exactly one real user
message, a small side request asks a model for a title. It runs in the background, writes only
`session.updated`, and never touches the session's messages; failures are logged and dropped.
"""

from __future__ import annotations

import logging
import re
from typing import Final

from agentforge.agents.registry import Agent, AgentRegistry, UnknownAgentError
from agentforge.config import Config, ConfigError
from agentforge.llm import events as ev
from agentforge.llm.messages import ModelRequest, TextContent, UserModelMessage
from agentforge.llm.provider import ResolvedModel, UnknownModelError
from agentforge.model.events import SESSION_UPDATED, Event
from agentforge.model.message import UserMessage, WithParts
from agentforge.model.part import SubtaskPart, TextPart
from agentforge.model.session import Session
from agentforge.session.scope import TenantScope
from agentforge.session.services import SessionServices

log = logging.getLogger(__name__)

TITLE_AGENT: Final = "title"
TITLE_REQUEST: Final = "Generate a title for this conversation:\n"
MAX_TITLE_LENGTH: Final = 100
# The title model needs the gist, not a pasted log: longer first messages are cut here.
MAX_SOURCE_CHARS: Final = 8_000
# Room for a reasoning model's thinking before its one line.
TITLE_OUTPUT_TOKENS: Final = 4_096

# Used until (or unless) the agent registry provides a `title` agent with a prompt of its own.
FALLBACK_PROMPT: Final = """You are a title generator. You output ONLY a thread title. Nothing else.

Generate a brief title that would help the user find this conversation later.
- A single line, 50 characters or fewer, no explanation
- Use the same language as the user's message
- Focus on the main topic or the question the user wants answered
- Keep exact technical terms, numbers, file names and error codes
- Remove filler words; do not use quotes or end with punctuation
- Never answer the question or use tools; only describe it
- If the message is a greeting or too short to tell, summarise it plainly (e.g. "Greeting")"""

_DEFAULT_TITLE = re.compile(r"^(New session - |Child session - )\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)


def is_default_title(title: str) -> bool:
    return _DEFAULT_TITLE.match(title) is not None


def enabled(config: Config) -> bool:
    """`"title": false` in the config turns title generation off."""
    return (config.model_extra or {}).get("title", True) is not False


def real_user_messages(history: list[WithParts]) -> list[WithParts]:
    """User messages not made entirely of synthetic parts."""
    return [
        item
        for item in history
        if isinstance(item.info, UserMessage)
        and any(not (isinstance(p, TextPart) and p.synthetic) for p in item.parts)
    ]


def should_generate(config: Config, session: Session, history: list[WithParts]) -> bool:
    return (
        enabled(config)
        and session.parent_id is None
        and is_default_title(session.title)
        and len(real_user_messages(history)) == 1
    )


def maybe_generate(
    services: SessionServices, scope: TenantScope, session: Session, history: list[WithParts]
) -> None:
    """Fire-and-forget: start title generation when the session qualifies (call on step 1)."""
    if not should_generate(scope.settings.config, session, history):
        return
    first = real_user_messages(history)[0]
    services.spawn(_generate_logged(services, scope, session.id, first))


async def _generate_logged(
    services: SessionServices, scope: TenantScope, session_id: str, first: WithParts
) -> None:
    try:
        await generate(services, scope, session_id, first)
    except Exception:
        log.exception("session %s: title generation failed", session_id)


async def generate(
    services: SessionServices, scope: TenantScope, session_id: str, first: WithParts
) -> str | None:
    """Ask for a title for the conversation that starts with `first` and store it; returns it (None
    when the model gave nothing usable or the session was renamed or deleted meanwhile)."""
    source = source_text(first)
    if not source:
        return None
    agent = title_agent(scope.agents)
    model = _title_model(scope, agent, first)
    title = clean_title(await _ask(services, model, _request(agent, model, source)))
    if not title:
        return None
    return title if await _store_title(services, scope.tenant_id, session_id, title) else None


def source_text(first: WithParts) -> str:
    """The user's own words (or, for a message of subtasks only, their prompts)."""
    texts = [p.text for p in first.parts if isinstance(p, TextPart) and not p.synthetic and not p.ignored]
    if not any(t.strip() for t in texts):
        texts = [p.prompt for p in first.parts if isinstance(p, SubtaskPart)]
    return "\n".join(t for t in texts if t.strip())[:MAX_SOURCE_CHARS]


def clean_title(raw: str) -> str:
    """Strip thinking, keep the first non-empty line, cap at MAX_TITLE_LENGTH characters."""
    text = _THINKING.sub("", raw)
    line = next((candidate.strip() for candidate in text.splitlines() if candidate.strip()), "")
    if len(line) > MAX_TITLE_LENGTH:
        line = line[: MAX_TITLE_LENGTH - 3] + "..."
    return line


def title_agent(agents: AgentRegistry) -> Agent | None:
    """The hidden `title` agent, when the registry has one."""
    try:
        return agents.get(TITLE_AGENT)
    except UnknownAgentError:
        return None


def system_prompt(agent: Agent | None) -> str:
    return (agent.prompt if agent is not None else None) or FALLBACK_PROMPT


def _title_model(scope: TenantScope, agent: Agent | None, first: WithParts) -> ResolvedModel:
    """The title agent's model, else the config's `small_model`, else the model of the turn."""
    catalog = scope.catalog
    for configured in (agent.model if agent else None, scope.settings.config.small_model):
        if not configured:
            continue
        try:
            return catalog.resolve(*catalog.parse(configured))
        except (UnknownModelError, ConfigError):
            log.warning("title model %r is not available; trying the next choice", configured)
    assert isinstance(first.info, UserMessage)
    return catalog.resolve(first.info.model.provider_id, first.info.model.model_id)


def _request(agent: Agent | None, model: ResolvedModel, source: str) -> ModelRequest:
    return ModelRequest(
        system=[system_prompt(agent)],
        messages=[UserModelMessage(content=[TextContent(text=TITLE_REQUEST + source)])],
        tools=[],
        temperature=agent.temperature if agent else None,
        max_output_tokens=min(model.limit_output or TITLE_OUTPUT_TOKENS, TITLE_OUTPUT_TOKENS),
        options={**model.options, **((agent.options if agent else None) or {})},
        headers=dict(model.headers),
    )


async def _ask(services: SessionServices, model: ResolvedModel, request: ModelRequest) -> str:
    """The text of one streamed answer (reasoning is ignored)."""
    chunks: list[str] = []
    stream = services.stream(model, request)
    try:
        async for event in stream:
            if isinstance(event, ev.TextDelta):
                chunks.append(event.text)
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    return "".join(chunks)


async def _store_title(services: SessionServices, tenant_id: str, session_id: str, title: str) -> bool:
    """Write the title unless someone renamed (or deleted) the session while the model thought."""
    session = await services.store.get_session(tenant_id, session_id)
    if session is None or not is_default_title(session.title):
        return False
    session.title = title
    event = Event(
        type=SESSION_UPDATED,
        properties={"sessionID": session.id, "info": session.wire()},
        session_id=session.id,
        tenant_id=tenant_id,
    )
    await services.store.write(event)
    return True
