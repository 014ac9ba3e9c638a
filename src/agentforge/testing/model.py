"""An in-process scripted model: a `StreamFn` the runtime runs against instead of a provider.

Like pydantic-ai's `FunctionModel`, without HTTP: each model call takes the next scripted response,
a `Turn` (text, reasoning, tool calls, usage, a fault) or a function of the request returning one,
and streams it as the events a provider adapter would produce. The loop, the processor, tool calls,
subtasks and retries then run for real, in milliseconds::

    model = ScriptedModel()
    model.respond(Turn().tool_call("read", {"filePath": "notes.txt"}), Turn().text("It says hi."))
    runtime = await Runtime.open(settings, stream=model)   # or create_app(settings, stream=model)
    ...
    model.requests[0].tools  # what the model was offered

Faults are raised the way adapters raise them, so the processor's retry and error rules apply:
`Turn().fail("rate_limit")` is retryable, `Turn().fail("context_overflow")` starts a compaction,
`Turn().fail("invalid_request")` is stored on the message. The wire-level fakes in the repository's
tests (tests/fakes) remain the way to test the adapters themselves.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from agentforge.llm import events as ev
from agentforge.llm.errors import ProviderStreamError
from agentforge.llm.messages import ModelRequest
from agentforge.llm.provider import ResolvedModel

FaultKind = Literal["rate_limit", "overloaded", "server_error", "invalid_request", "context_overflow"]
_FAULT_MESSAGES: dict[str, str] = {
    "rate_limit": "Rate limit reached, slow down",
    "overloaded": "Overloaded",
    "server_error": "The server had an error",
    "invalid_request": "Invalid request",
    "context_overflow": "This model's maximum context length is 1000 tokens",
}


class NoScriptLeftError(Exception):
    """The model was called more often than responses were scripted."""


@dataclass(slots=True)
class _Pause:
    gate: asyncio.Event


@dataclass(slots=True)
class _Fault:
    error: BaseException


_Step = ev.StreamEvent | _Pause | _Fault


@dataclass
class Turn:
    """One model call's response, built in the order it streams."""

    steps: list[_Step] = field(default_factory=list)
    usage_reported: ev.Usage = field(default_factory=ev.Usage)
    finish_reason: str | None = None
    _blocks: itertools.count[int] = field(default_factory=itertools.count)
    _has_tool_calls: bool = False

    def text(self, text: str, *, chunk_size: int = 0, metadata: dict[str, Any] | None = None) -> Turn:
        """A text block; streamed in pieces of `chunk_size` characters (0: one delta)."""
        block = f"text-{next(self._blocks)}"
        self.steps.append(ev.TextStart(id=block, metadata=metadata))
        self.steps.extend(ev.TextDelta(id=block, text=piece) for piece in _pieces(text, chunk_size))
        self.steps.append(ev.TextEnd(id=block))
        return self

    def reasoning(self, text: str, *, metadata: dict[str, Any] | None = None) -> Turn:
        """A reasoning block; `metadata` arrives with its end (like Anthropic's signatures)."""
        block = f"reasoning-{next(self._blocks)}"
        self.steps.append(ev.ReasoningStart(id=block))
        self.steps.append(ev.ReasoningDelta(id=block, text=text))
        self.steps.append(ev.ReasoningEnd(id=block, metadata=metadata))
        return self

    def tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        call_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Turn:
        """A tool call; `arguments` as an object, or as raw text (to script malformed JSON)."""
        call = call_id or f"call_{next(self._blocks)}"
        raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        self.steps.append(ev.ToolInputStart(id=call, tool_name=name))
        self.steps.append(ev.ToolCall(call_id=call, tool_name=name, input_text=raw, metadata=metadata))
        self._has_tool_calls = True
        return self

    def usage(
        self,
        input_tokens: int,
        output_tokens: int,
        *,
        reasoning: int = 0,
        cached: int = 0,
        cache_write: int = 0,
    ) -> Turn:
        """The tokens the step-finish reports."""
        self.usage_reported = ev.Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            reasoning_tokens=reasoning,
            cached_input_tokens=cached,
            cache_write_tokens=cache_write,
        )
        return self

    def finish(self, reason: str) -> Turn:
        """The finish reason ("stop", "length", "tool-calls", "content-filter", ...); by default
        "tool-calls" when the turn calls tools, else "stop"."""
        self.finish_reason = reason
        return self

    def pause(self, gate: asyncio.Event) -> Turn:
        """Stop streaming here until `gate` is set (to abort a turn mid-stream, or to act while it runs)."""
        self.steps.append(_Pause(gate))
        return self

    def fail(self, kind: FaultKind, message: str | None = None) -> Turn:
        """The provider reports an error here, as an error event inside the stream; nothing after it
        streams. `kind` decides what the processor does with it (retry, compaction, stored error)."""
        body = {"error": {"type": kind, "message": message or _FAULT_MESSAGES[kind]}}
        return self.raise_(ProviderStreamError(message or _FAULT_MESSAGES[kind], body=body))

    def raise_(self, error: BaseException) -> Turn:
        """The stream raises `error` here, as an adapter would let a transport error through."""
        self.steps.append(_Fault(error))
        return self

    def events(self) -> list[_Step]:
        """What the call streams: the scripted steps framed by start and finish events."""
        faulted = any(isinstance(step, _Fault) for step in self.steps)
        head: list[_Step] = [ev.StreamStart(), ev.StepStart(), *self.steps]
        if faulted:
            return head
        reason = self.finish_reason or ("tool-calls" if self._has_tool_calls else "stop")
        return [*head, ev.StepFinish(finish_reason=reason, usage=self.usage_reported), ev.StreamFinish()]


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or len(text) <= size:
        return [text]
    return [text[start : start + size] for start in range(0, len(text), size)]


Response = Turn | Callable[[ModelRequest], Turn]


@dataclass
class ScriptedModel:
    """A `StreamFn`: each call streams the next scripted response. `requests` and `models` record
    what each call was sent, in order."""

    responses: list[Response] = field(default_factory=list)
    requests: list[ModelRequest] = field(default_factory=list)
    models: list[ResolvedModel] = field(default_factory=list)

    def respond(self, *responses: Response) -> ScriptedModel:
        """Queue responses for the next calls: a `Turn`, or a function of the request returning one."""
        self.responses.extend(responses)
        return self

    def reply(self, text: str) -> ScriptedModel:
        """Queue a call that answers `text` and stops."""
        return self.respond(Turn().text(text))

    def call(self, name: str, arguments: dict[str, Any]) -> ScriptedModel:
        """Queue a call that calls one tool."""
        return self.respond(Turn().tool_call(name, arguments))

    @property
    def pending(self) -> int:
        """How many responses are still queued."""
        return len(self.responses)

    def __call__(self, model: ResolvedModel, request: ModelRequest) -> AsyncIterator[ev.StreamEvent]:
        self.models.append(model)
        self.requests.append(request)
        if not self.responses:
            raise NoScriptLeftError(
                f"the scripted model was called {len(self.requests)} times, more than scripted"
            )
        response = self.responses.pop(0)
        turn = response if isinstance(response, Turn) else response(request)
        return _stream(turn.events())


async def _stream(steps: list[_Step]) -> AsyncIterator[ev.StreamEvent]:
    for step in steps:
        if isinstance(step, _Pause):
            await step.gate.wait()
        elif isinstance(step, _Fault):
            raise step.error
        else:
            yield step
            await asyncio.sleep(0)  # a real stream yields to the event loop between chunks
