"""The processor: one model call = one assistant message (KERNEL 5).

It consumes our stream events and turns each into part writes through the three intents; it never
touches SQL. Tool calls run as tasks beside the stream; the step finishes once they have settled.
Retries re-run the stream into the same message; `cleanup` always runs once at the end and leaves no
part open and no tool call unfinished.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.clock import now_ms as clock_ms
from agentforge.llm import events as ev
from agentforge.llm.errors import to_named_error
from agentforge.llm.messages import ModelRequest
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.retry import retry_delay_ms, retryable_message
from agentforge.llm.usage import step_usage
from agentforge.model import ids
from agentforge.model.errors import (
    APIError,
    ContentFilterError,
    ContextOverflowError,
    MessageAbortedError,
    MessageData,
    MessageOutputLengthError,
    NamedError,
    aborted_error,
)
from agentforge.model.events import Event
from agentforge.model.message import AssistantMessage, WithParts
from agentforge.model.part import (
    Part,
    ReasoningPart,
    SpanTime,
    StepFinishPart,
    StepStartPart,
    TextPart,
    Tokens,
)
from agentforge.model.session import StatusBusy, StatusIdle, StatusRetry
from agentforge.session.checkpoint import PartCheckpoints
from agentforge.session.events import SessionEvents, now_ms
from agentforge.session.observer import (
    NULL_OBSERVER,
    CalledModel,
    ModelCallObservation,
    SessionObserver,
)
from agentforge.session.status import StatusTracker
from agentforge.session.tool_calls import ToolCallRunner
from agentforge.session.turn_tools import TurnTools
from agentforge.tools.truncation import TruncationLimits

Outcome = Literal["continue", "stop", "compact"]
StreamFn = Callable[[ResolvedModel, ModelRequest], AsyncIterator[ev.StreamEvent]]
# Whether a step's tokens no longer fit the model's context (compaction.is_overflow, bound to config).
OverflowFn = Callable[[Tokens, ResolvedModel], bool]


@dataclass(slots=True)
class ProcessorDeps:
    events: SessionEvents
    status: StatusTracker
    stream: StreamFn
    limits: TruncationLimits
    data_dir: Path
    max_retries: int = 5
    # Route provider context-overflow errors to compaction instead of storing them on the message.
    compaction: bool = False
    # Checked after every finish-step of a non-summary message: True stops the stream with "compact".
    overflow: OverflowFn | None = None
    clock: Clock = SYSTEM_CLOCK  # what retry back-off reads and sleeps on
    observer: SessionObserver = NULL_OBSERVER


class Processor:
    def __init__(
        self,
        deps: ProcessorDeps,
        message: AssistantMessage,
        model: ResolvedModel,
        tools: TurnTools,
    ) -> None:
        self.deps = deps
        self.message = message
        self.model = model
        self.needs_compaction = False
        self.aborted = False
        self._text: dict[str, TextPart] = {}
        self._reasoning: dict[str, ReasoningPart] = {}
        self._calls = ToolCallRunner(deps.events, message, tools, deps.limits, observer=deps.observer)
        self._written: dict[str, Part] = {}
        self._checkpoints = PartCheckpoints(deps.events, deps.clock)
        # What the current attempt streamed (text, reasoning, step starts): removed if it fails.
        self._attempt: list[Part] = []
        # A step's start waits for the step's first content, to commit with it (see `_handle`).
        self._step_start: StepStartPart | None = None
        self._observed: ModelCallObservation | None = None
        self._streamed = False  # whether content has arrived yet (time to first token)
        self._last_write: asyncio.Future[Event] | None = None  # the last part submitted (`_save`)
        # Called once the message's last write is submitted, before it is waited for (the loop
        # queues its next history read right behind it).
        self.after_last_write: Callable[[], None] | None = None

    @property
    def blocked(self) -> bool:
        return self._calls.blocked

    @property
    def made_tool_calls(self) -> bool:
        return bool(self._calls.parts)

    def result(self) -> WithParts:
        """The message and its parts as last written (what the store now holds)."""
        parts = {**self._written, **{p.id: p for p in self._calls.parts}}
        return WithParts(info=self.message, parts=[parts[key] for key in sorted(parts)])

    def _save(self, part: Part) -> None:
        if part.id not in self._written and isinstance(part, TextPart | ReasoningPart | StepStartPart):
            self._attempt.append(part)
        self._written[part.id] = part
        self._last_write = self.deps.events.submit_part(part)

    async def process(self, request: ModelRequest) -> Outcome:
        message, observer = self.message, self.deps.observer
        model = CalledModel(self.model.provider_id, self.model.model_id, self.model.api)
        tenant_id = self.deps.events.tenant_id
        with observer.model_call(tenant_id, message.session_id, message.id, model) as self._observed:
            try:
                await self._run_attempts(request)
            except asyncio.CancelledError:
                self.aborted = True
                if self.message.error is None:
                    await self._halt(aborted_error())
                raise
            finally:
                await self._cleanup()
                self._observed.finish(
                    _error_name(message.error), self._content() if observer.wants_content else None
                )
        if self.needs_compaction:
            return "compact"
        if self.blocked or self.message.error is not None:
            return "stop"
        return "continue"

    async def _run_attempts(self, request: ModelRequest) -> None:
        attempt = 0
        while True:
            try:
                await self._consume(self.deps.stream(self.model, request))
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every provider fault ends in a retry or a stored error
                error = to_named_error(exc, provider_id=self.model.provider_id)
            attempt += 1
            if not await self._wait_for_retry(error, attempt):
                await self._halt(error)
                return

    async def _wait_for_retry(self, error: NamedError, attempt: int) -> bool:
        message = retryable_message(error)
        if message is None or attempt > self.deps.max_retries:
            return False
        clock = self.deps.clock
        delay = retry_delay_ms(attempt, error, now=clock.time)
        if self._observed is not None:
            self._observed.retry(_retry_reason(error), attempt)
        self.deps.status.set(
            self.deps.events.tenant_id,
            self.message.session_id,
            StatusRetry(attempt=attempt, message=message, next=clock_ms(clock) + delay),
        )
        await clock.sleep(delay / 1000)
        self.deps.status.set(self.deps.events.tenant_id, self.message.session_id, StatusBusy())
        self._discard_attempt()
        return True

    def _discard_attempt(self) -> None:
        """A retry starts over: what the failed attempt streamed is removed (message.part.removed),
        so it is neither part of the reply nor sent back to the model. Tool calls it made and the
        usage of steps it finished stay: they happened."""
        self._text.clear()
        self._reasoning.clear()
        self._step_start = None  # never written: nothing to remove
        for part in self._attempt:
            self._written.pop(part.id, None)
            self.deps.events.remove_part(part)
        self._attempt.clear()

    async def _consume(self, stream: AsyncIterator[ev.StreamEvent]) -> None:
        try:
            async for event in stream:
                if type(event) is ev.TextDelta and self._streamed:
                    # Most of a stream: no coroutine and no match per delta.
                    self._append(self._text.get(event.id), event.text)
                    continue
                first = not self._streamed
                await self._handle(event)
                if first and self._streamed:
                    await self._first_write_committed()
                if self.needs_compaction:
                    return
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    async def _first_write_committed(self) -> None:
        """Once per model call, when its first content opened a text or reasoning block and the
        writer is a thread (SQLite): wait for the parts submitted so far to commit before reading
        on. A provider often sends the start of a reply in one read; processed on at once, the
        writer thread would wait for the interpreter, and every delta of the read (published once
        its part has committed, by the event loop this keeps busy) behind the rest of it. Costs one
        more commit per call, so not where the writer is a task on the loop (Postgres: there the
        turn took ~2 ms longer for ~1.4 ms off the first delta), and not again after a retry. The
        write's outcome is reported where every write's is."""
        streams_text = bool(self._text or self._reasoning)  # a step opening with a tool call: no delta
        if streams_text and self._last_write is not None and self.deps.events.commits_off_loop:
            await asyncio.wait([self._last_write])

    async def _handle(self, event: ev.StreamEvent) -> None:
        if not self._streamed and isinstance(event, _CONTENT_EVENTS):
            self._streamed = True
            if self._observed is not None:
                self._observed.first_token()
        if not isinstance(event, _BEFORE_CONTENT):
            self._flush_step_start()
        match event:
            case ev.StreamStart():
                self.deps.status.set(self.deps.events.tenant_id, self.message.session_id, StatusBusy())
            case ev.StepStart():
                self._flush_step_start()  # an empty step before this one still counts
                # Its id now (parts keep their order); written with the step's first part, so the
                # first text part commits in the same batch instead of queueing behind it (its
                # deltas wait for that commit).
                self._step_start = StepStartPart(
                    id=self._part_id(), session_id=self.message.session_id, message_id=self.message.id
                )
            case ev.TextStart(id=block_id, metadata=metadata):
                await self._start_text(block_id, metadata)
            case ev.TextDelta(id=block_id, text=text):
                self._append(self._text.get(block_id), text)
            case ev.TextEnd(id=block_id):
                self._end_block(self._text.pop(block_id, None))
            case ev.ReasoningStart(id=block_id, metadata=metadata):
                await self._start_reasoning(block_id, metadata)
            case ev.ReasoningDelta(id=block_id, text=text):
                self._append(self._reasoning.get(block_id), text)
            case ev.ReasoningEnd(id=block_id, metadata=metadata):
                self._end_reasoning(self._reasoning.pop(block_id, None), metadata)
            case ev.ToolInputStart(id=call_id, tool_name=name):
                self._guard_summary()
                await self._calls.pending(call_id, name)
            case ev.ToolCall():
                self._guard_summary()
                await self._calls.start(event)
            case ev.StepFinish():
                await self._finish_step(event)
            case ev.StreamFinish():
                pass

    def _flush_step_start(self) -> None:
        if self._step_start is not None:
            pending, self._step_start = self._step_start, None
            self._save(pending)

    def _guard_summary(self) -> None:
        if self.message.summary:
            raise RuntimeError("Tool call not allowed while generating summary")

    def _part_id(self) -> str:
        return ids.ascending("prt")

    async def _start_text(self, block_id: str, metadata: dict[str, Any] | None) -> None:
        part = TextPart(
            id=self._part_id(),
            session_id=self.message.session_id,
            message_id=self.message.id,
            text="",
            time=SpanTime(start=now_ms()),
            metadata=metadata,
        )
        self._text[block_id] = part
        # Not awaited: deltas are published behind pending writes, so after this full update.
        self._save(part)

    async def _start_reasoning(self, block_id: str, metadata: dict[str, Any] | None) -> None:
        if block_id in self._reasoning:
            return
        part = ReasoningPart(
            id=self._part_id(),
            session_id=self.message.session_id,
            message_id=self.message.id,
            text="",
            time=SpanTime(start=now_ms()),
            metadata=metadata,
        )
        self._reasoning[block_id] = part
        self._save(part)

    def _append(self, part: TextPart | ReasoningPart | None, text: str) -> None:
        if part is None or not text:
            return
        part.text += text
        self.deps.events.part_delta(part, "text", text)
        self._checkpoints.grew(part)

    def _end_reasoning(self, part: ReasoningPart | None, metadata: dict[str, Any] | None) -> None:
        if part is not None and metadata:
            part.metadata = {**(part.metadata or {}), **metadata}
        self._end_block(part)

    def _end_block(self, part: TextPart | ReasoningPart | None) -> None:
        if part is None or part.time is None:
            return
        part.time = SpanTime(start=part.time.start, end=now_ms())
        self._checkpoints.ended(part.id)
        self._save(part)

    async def _close_open_blocks(self) -> None:
        for text_part in self._text.values():
            self._end_block(text_part)
        for reasoning_part in self._reasoning.values():
            self._end_block(reasoning_part)
        self._text.clear()
        self._reasoning.clear()

    async def _finish_step(self, event: ev.StepFinish) -> None:
        self._attempt.clear()  # a finished step is kept whatever happens after it
        # Tool results belong to this step: they land before the step boundary.
        await self._calls.settle()
        await self._close_open_blocks()
        tokens, cost = step_usage(self.model, event.usage)
        if self._observed is not None:
            self._observed.usage(tokens.input, tokens.output, cost, event.finish_reason)
        self.message.finish = event.finish_reason
        self.message.cost += cost
        self.message.tokens = tokens
        stopped = _stopped_by_provider(event.finish_reason)
        if stopped is not None and self.message.error is None:
            # A reply cut short is stored as an error the user can see and act on; the loop stops.
            self.message.error = stopped
            self.deps.events.session_error(self.message.session_id, stopped.wire())
        self._save(
            StepFinishPart(
                id=self._part_id(),
                session_id=self.message.session_id,
                message_id=self.message.id,
                reason=event.finish_reason,
                cost=cost,
                tokens=tokens,
            )
        )
        self.deps.events.submit_message(self.message)
        overflow = self.deps.overflow
        if not self.message.summary and overflow is not None and overflow(tokens, self.model):
            self.needs_compaction = True

    async def _halt(self, error: NamedError) -> None:
        if isinstance(error, ContextOverflowError) and self.deps.compaction:
            self.needs_compaction = True
            self.deps.events.session_error(self.message.session_id, error.wire())
            return
        self.message.error = error
        self.deps.events.session_error(self.message.session_id, error.wire())
        if not isinstance(error, MessageAbortedError):
            self.deps.status.set(self.deps.events.tenant_id, self.message.session_id, StatusIdle())

    def _content(self) -> str:
        """The reply's text (reported only with the content opt-in)."""
        return "".join(p.text for p in self._written.values() if isinstance(p, TextPart))

    async def _cleanup(self) -> None:
        """Runs exactly once: closes open parts, fails unfinished tool calls, completes the message."""
        self._flush_step_start()  # a step that started stays recorded, as any other part
        await self._close_open_blocks()
        await self._calls.abandon()
        self.message.time.completed = now_ms()
        written = self.deps.events.submit_message(self.message)
        if self.after_last_write is not None:
            self.after_last_write()
        await written


# Events that come before a step's content: the step's start is not written for them yet.
_BEFORE_CONTENT = (ev.StreamStart, ev.StepStart, ev.StreamFinish)

# What counts as the model's first token: any streamed content, text, reasoning or a tool call.
_CONTENT_EVENTS = (ev.TextDelta, ev.ReasoningDelta, ev.ToolInputStart, ev.ToolCall)


def _error_name(error: NamedError | None) -> str | None:
    return None if error is None else error.name


def _retry_reason(error: NamedError) -> str:
    """A bounded label: the error's name, with the HTTP status for provider API errors."""
    if isinstance(error, APIError) and error.data.status_code is not None:
        return f"http_{error.data.status_code}"
    return error.name


def _stopped_by_provider(reason: str) -> MessageOutputLengthError | ContentFilterError | None:
    """KERNEL 3.3: a reply the provider cut at the output limit or by its content filter."""
    if reason == "length":
        return MessageOutputLengthError()
    if reason == "content-filter":
        return ContentFilterError(
            data=MessageData(message="The provider's content filter stopped this reply.")
        )
    return None
