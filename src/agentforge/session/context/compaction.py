"""Compaction (KERNEL 6.1-6.3): overflow detection, the compaction request, and the summary.

When the last step's tokens reach the model's usable context (or the provider says the prompt is too
long), the loop persists a user message with a `compaction` part. The next iteration hands it to
`Compactor.process`: the hidden `compaction` agent summarises the history before the newest turns,
which are kept verbatim (the part records where that tail starts), and the loop goes on from the
summary. `filter_compacted` (history.py) and the store's boundary read then hide what was summarised.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentforge.agents.registry import Agent, UnknownAgentError
from agentforge.config import Config, ConfigError
from agentforge.llm.messages import ModelRequest, TextContent, UserModelMessage
from agentforge.llm.provider import ResolvedModel, UnknownModelError
from agentforge.model import ids
from agentforge.model.errors import ContextOverflowError, ContextOverflowErrorData
from agentforge.model.events import Event
from agentforge.model.message import (
    AssistantMessage,
    UserMessage,
    UserTime,
    WithParts,
)
from agentforge.model.part import CompactionPart, FilePart, ModelRef, Part, SpanTime, TextPart, Tokens
from agentforge.model.session import Session
from agentforge.permission.gate import TurnPermissions
from agentforge.plugins import calls as hooks
from agentforge.session.context.history import is_compaction_request, to_model_messages
from agentforge.session.events import SessionEvents, now_ms
from agentforge.session.processor import Outcome, Processor, ProcessorDeps
from agentforge.session.scope import TenantScope
from agentforge.session.services import SessionServices
from agentforge.session.skeleton import assistant_skeleton
from agentforge.session.turn_tools import TurnTools
from agentforge.tools.services import NO_SERVICES

log = logging.getLogger(__name__)

COMPACTION_AGENT: Final = "compaction"
SESSION_COMPACTED: Final = "session.compacted"
OUTPUT_TOKEN_MAX: Final = 32_000
COMPACTION_BUFFER: Final = 20_000
DEFAULT_TAIL_TURNS: Final = 2
MIN_PRESERVE_RECENT_TOKENS: Final = 2_000
MAX_PRESERVE_RECENT_TOKENS: Final = 8_000

CONTINUE_TEXT: Final = (
    "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed."
)
MEDIA_REMOVED_TEXT: Final = (
    "The previous request exceeded the model's context window, so the conversation was summarised and "
    'attached media were replaced by "[Attached ...]" placeholders.'
)
REPLAY_TOO_LARGE: Final = "Conversation history too large to compact - exceeds model context limit"
SESSION_TOO_LARGE: Final = (
    "Session too large to compact - context exceeds model limit even after stripping media"
)

# Used until the agent registry has a `compaction` agent of its own.
FALLBACK_PROMPT: Final = """You summarise a conversation between a user and a coding agent so that
another agent can continue the work from your summary alone. Write Markdown with the sections Goal,
Instructions, Discoveries, Accomplished (done / in progress / left) and Relevant files. Be specific
(names, paths, commands, errors) and concise. Do not call tools."""

SUMMARY_REQUEST: Final = (
    "Provide a detailed summary of the conversation above, following your instructions, so that the work "
    "can continue from it."
)


class CompactionConfig(BaseModel):
    """The config file's `compaction` section."""

    model_config = ConfigDict(extra="ignore")

    auto: bool = True
    prune: bool = True
    reserved: int | None = Field(default=None, ge=0)
    tail_turns: int = Field(default=DEFAULT_TAIL_TURNS, ge=0)
    preserve_recent_tokens: int | None = Field(default=None, ge=0)

    @classmethod
    def of(cls, config: Config) -> CompactionConfig:
        raw = (config.model_extra or {}).get("compaction") or {}
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(f"invalid compaction config: {exc}") from exc


def usable_tokens(model: ResolvedModel, config: CompactionConfig) -> int:
    """How much of the context a request may fill before it must be compacted (KERNEL 6.1)."""
    if model.limit_context == 0:
        return 0
    max_output = min(model.limit_output, OUTPUT_TOKEN_MAX) or OUTPUT_TOKEN_MAX
    if model.limit_input:
        reserved = config.reserved if config.reserved is not None else min(COMPACTION_BUFFER, max_output)
        return max(0, model.limit_input - reserved)
    return max(0, model.limit_context - max_output)


def is_overflow(tokens: Tokens, model: ResolvedModel, config: CompactionConfig) -> bool:
    """The last step's context no longer fits. A model with no known context never overflows, and
    `compaction.auto = false` turns detection off."""
    if not config.auto or model.limit_context == 0:
        return False
    count = tokens.total or (tokens.input + tokens.output + tokens.cache.read + tokens.cache.write)
    return count >= usable_tokens(model, config)


def estimate_tokens(text: str) -> int:
    return len(text) // 4


def preserve_budget(model: ResolvedModel, config: CompactionConfig) -> int:
    if config.preserve_recent_tokens is not None:
        return config.preserve_recent_tokens
    quarter = usable_tokens(model, config) // 4
    return max(MIN_PRESERVE_RECENT_TOKENS, min(quarter, MAX_PRESERVE_RECENT_TOKENS))


def tail_start(messages: list[WithParts], turns: int, budget: int) -> int | None:
    """Index in `messages` where the preserved tail begins: the newest `turns` user turns (fewer when
    they do not fit `budget` tokens), or None when nothing is kept verbatim.

    Only the newest run of messages in id order qualifies (an earlier compaction reorders history),
    and the oldest turn of that run stays with the head, so there is always something to summarise.
    """
    if turns <= 0 or not messages:
        return None
    run = len(messages) - 1
    while run > 0 and messages[run - 1].info.id < messages[run].info.id:
        if is_compaction_request(messages[run - 1]):
            break
        run -= 1
    starts = [
        index
        for index in range(run, len(messages))
        if isinstance(messages[index].info, UserMessage) and not is_compaction_request(messages[index])
    ]
    candidates = starts[1:][-turns:]
    for index in candidates:  # oldest first: the most turns that fit
        converted = to_model_messages(messages[index:], strip_media=True)
        if estimate_tokens(orjson.dumps(converted).decode()) <= budget:
            return index
    return None


def split_replay(earlier: list[WithParts]) -> tuple[list[WithParts], WithParts | None]:
    """KERNEL 6.3 step 2: the newest user-authored message is re-sent after the summary instead of
    being summarised, unless nothing user-authored would be left to summarise."""
    for index in range(len(earlier) - 1, -1, -1):
        item = earlier[index]
        if isinstance(item.info, UserMessage) and not is_compaction_request(item):
            head = earlier[:index]
            if any(isinstance(m.info, UserMessage) and not is_compaction_request(m) for m in head):
                return head, item
            return earlier, None
    return earlier, None


@dataclass(slots=True)
class Compactor:
    """Compaction for one session's loop."""

    services: SessionServices
    scope: TenantScope
    session: Session
    config: CompactionConfig

    @classmethod
    def for_session(cls, services: SessionServices, scope: TenantScope, session: Session) -> Compactor:
        return cls(services, scope, session, CompactionConfig.of(scope.settings.config))

    @property
    def tenant_id(self) -> str:
        return self.scope.tenant_id

    @property
    def events(self) -> SessionEvents:
        return self.services.events(self.tenant_id)

    def overflows(self, tokens: Tokens, model: ResolvedModel) -> bool:
        return is_overflow(tokens, model, self.config)

    async def create(self, *, agent: str, model: ModelRef, auto: bool, overflow: bool = False) -> WithParts:
        """KERNEL 6.2: persist a user message holding one `compaction` part; the loop's next
        iteration finds it as a pending task. Returns once it is durable."""
        info = UserMessage(
            id=ids.ascending("msg"),
            session_id=self.session.id,
            time=UserTime(created=now_ms()),
            agent=agent,
            model=model,
        )
        part = CompactionPart(
            id=ids.ascending("prt"),
            session_id=self.session.id,
            message_id=info.id,
            auto=auto,
            overflow=overflow,
        )
        events = self.events
        events.submit_message(info)
        await events.update_part(part)
        return WithParts(info=info, parts=[part])

    async def process(
        self, task: CompactionPart, history: list[WithParts]
    ) -> tuple[Outcome, WithParts | None]:
        """KERNEL 6.3: summarise, then replay the overflowing request or ask the model to continue.
        Returns "stop" when the summary failed, and the summary message as written."""
        parent = next((m for m in history if m.info.id == task.message_id), None)
        if parent is None or not isinstance(parent.info, UserMessage):
            raise LookupError(f"compaction message {task.message_id} is not a user message in history")
        earlier = [m for m in history if m.info.id < parent.info.id]
        replay: WithParts | None = None
        if task.overflow:
            earlier, replay = split_replay(earlier)
        agent = self._agent()
        model = self._model(agent, parent.info)
        head = earlier
        # An overflow with nothing to replay is one request too large: keep nothing verbatim.
        if not task.overflow or replay is not None:
            split = tail_start(earlier, self.config.tail_turns, preserve_budget(model, self.config))
            if split is not None:
                head = earlier[:split]
                task = task.model_copy(update={"tail_start_id": earlier[split].info.id})
                await self.events.update_part(task)
        summary = await self._summarise(agent, model, parent.info, head, replaying=replay is not None)
        if not isinstance(summary.info, AssistantMessage) or summary.info.error is not None:
            return "stop", summary
        if task.auto:
            await self._continue(parent.info, replay, overflow=bool(task.overflow))
        self.services.store.publish_after_writes(
            Event(
                type=SESSION_COMPACTED,
                properties={"sessionID": self.session.id},
                session_id=self.session.id,
                tenant_id=self.tenant_id,
            )
        )
        return "continue", summary

    def _agent(self) -> Agent:
        try:
            return self.scope.agents.get(COMPACTION_AGENT)
        except UnknownAgentError:
            return Agent(
                name=COMPACTION_AGENT, mode="primary", native=True, hidden=True, prompt=FALLBACK_PROMPT
            )

    def _model(self, agent: Agent, parent: UserMessage) -> ResolvedModel:
        catalog = self.scope.catalog
        if agent.model:
            try:
                return catalog.resolve(*catalog.parse(agent.model))
            except UnknownModelError:
                log.warning("compaction agent model %s is unknown; using the session's", agent.model)
        return catalog.resolve(parent.model.provider_id, parent.model.model_id)

    async def _summarise(
        self,
        agent: Agent,
        model: ResolvedModel,
        parent: UserMessage,
        head: list[WithParts],
        *,
        replaying: bool,
    ) -> WithParts:
        message = assistant_skeleton(
            session_id=self.session.id,
            directory=self.session.directory,
            parent_id=parent.id,
            model=model,
            agent=agent.name,
            variant=parent.model.variant,
            summary=True,
        )
        events = self.events
        events.submit_message(message)
        plugins, sid = self.services.plugins, self.session.id
        head = await hooks.history(plugins, session_id=sid, messages=head)
        request = self._request(agent, model, head)
        await hooks.model_request(plugins, request, session_id=sid, agent=agent.name, model=model)
        processor = Processor(self._deps(events), message, model, self._no_tools(agent))
        outcome = await processor.process(request)
        if outcome == "compact":  # the summary request itself was too long for the model
            text = REPLAY_TOO_LARGE if replaying else SESSION_TOO_LARGE
            message.error = ContextOverflowError(data=ContextOverflowErrorData(message=text))
            message.finish = "error"
            await events.update_message(message)
            events.session_error(sid, message.error.wire())
        return processor.result()

    def _request(self, agent: Agent, model: ResolvedModel, head: list[WithParts]) -> ModelRequest:
        messages = to_model_messages(head, strip_media=True, model=(model.provider_id, model.model_id))
        messages.append(UserModelMessage(content=[TextContent(text=SUMMARY_REQUEST)]))
        return ModelRequest(
            system=[agent.prompt or FALLBACK_PROMPT],
            messages=messages,
            temperature=agent.temperature,
            top_p=agent.top_p,
            max_output_tokens=min(model.limit_output, OUTPUT_TOKEN_MAX) or OUTPUT_TOKEN_MAX,
            options={**model.options, **(agent.options or {})},
            headers=dict(model.headers),
        )

    def _deps(self, events: SessionEvents) -> ProcessorDeps:
        return ProcessorDeps(
            events=events,
            status=self.services.status,
            stream=self.services.stream,
            clock=self.services.clock,
            limits=self.scope.limits,
            data_dir=self.scope.settings.data_dir,
            max_retries=self.scope.max_retries,
            # A summary that overflows must come back as "compact", to be stored as its own error.
            compaction=True,
        )

    def _no_tools(self, agent: Agent) -> TurnTools:
        return TurnTools(
            tools={},
            directory=Path(self.session.directory),
            data_dir=self.scope.settings.data_dir,
            agent=agent.name,
            permissions=TurnPermissions(
                self.services.permissions, self.tenant_id, self.session.id, agent.permission
            ),
            confinement=self.scope.confinement,
            services=NO_SERVICES,
            plugins=self.services.plugins,
        )

    async def _continue(self, parent: UserMessage, replay: WithParts | None, *, overflow: bool) -> None:
        """KERNEL 6.3 step 8: re-send the request that overflowed, or ask the model to go on."""
        if replay is not None and isinstance(replay.info, UserMessage):
            info = replay.info.model_copy(
                update={"id": ids.ascending("msg"), "time": UserTime(created=now_ms())}
            )
            parts = [
                copy_part(part, info.id) for part in replay.parts if not isinstance(part, CompactionPart)
            ]
        else:
            info = UserMessage(
                id=ids.ascending("msg"),
                session_id=self.session.id,
                time=UserTime(created=now_ms()),
                agent=parent.agent,
                model=parent.model,
            )
            now = now_ms()
            text = f"{MEDIA_REMOVED_TEXT}\n\n{CONTINUE_TEXT}" if overflow else CONTINUE_TEXT
            parts = [
                TextPart(
                    id=ids.ascending("prt"),
                    session_id=self.session.id,
                    message_id=info.id,
                    text=text,
                    synthetic=True,
                    time=SpanTime(start=now, end=now),
                    metadata={"compaction_continue": True},
                )
            ]
        events = self.events
        events.submit_message(info)
        for part in parts:
            events.submit_part(part)
        await events.update_message(info)  # durable, with every part submitted before it


def copy_part(part: Part, message_id: str) -> Part:
    """A part of a replayed message, under the new message with a new id; media become a note."""
    if (
        isinstance(part, FilePart)
        and not part.mime.startswith("text/")
        and part.mime != "application/x-directory"
    ):
        return TextPart(
            id=ids.ascending("prt"),
            session_id=part.session_id,
            message_id=message_id,
            text=f"[Attached {part.mime}: {part.filename or 'file'}]",
        )
    copied: Part = part.model_copy(update={"id": ids.ascending("prt"), "message_id": message_id})
    return copied
