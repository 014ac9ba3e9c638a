"""The one entry point for a model call: picks the adapter for the model's wire protocol.

Adapters are imported on first use, off the event loop: each pulls in a provider SDK (anthropic,
openai, google-genai: seconds together), and a server or a CLI run usually needs one or none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Protocol, cast

from agentforge.llm.events import StreamEvent
from agentforge.llm.messages import ModelRequest
from agentforge.llm.pool import close_all_clients
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.sdk_import import import_off_loop

# api -> the module (in agentforge.llm) that speaks it.
ADAPTER_MODULES = {
    "openai": "openai_chat",
    "azure": "azure_openai",
    "openai-responses": "openai_responses",
    "google": "google_gemini",
    "anthropic": "anthropic_messages",
    "anthropic-bedrock": "anthropic_messages",
    "anthropic-vertex": "anthropic_messages",
}
SUPPORTED_APIS = tuple(ADAPTER_MODULES)


class _Adapter(Protocol):
    def stream(self, model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...


class UnsupportedApiError(Exception):
    """The model's provider speaks a wire protocol we have no adapter for."""


def stream(model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Our stream events for one model call.

    Consume it under `contextlib.aclosing(...)`: leaving the loop early (or being cancelled between
    events) then closes the HTTP response at once instead of whenever the generator is collected.
    Errors propagate as raised (an unsupported api at the first event); map them with
    `agentforge.llm.errors.to_named_error`.
    """
    return _AdapterStream(model, request)


class _AdapterStream:
    """The adapter's own event iterator once it is loaded, each event handed on without a generator
    step of ours in between (one per streamed event)."""

    __slots__ = ("_events", "_model", "_request")

    def __init__(self, model: ResolvedModel, request: ModelRequest) -> None:
        self._model = model
        self._request = request
        self._events: AsyncIterator[StreamEvent] | None = None

    def __aiter__(self) -> _AdapterStream:
        return self

    def __anext__(self) -> Awaitable[StreamEvent]:
        if self._events is not None:
            return self._events.__anext__()
        return self._first()

    async def _first(self) -> StreamEvent:
        module = ADAPTER_MODULES.get(self._model.api)
        if module is None:
            raise UnsupportedApiError(
                f"Provider {self._model.provider_id} uses api {self._model.api!r}; "
                f"supported: {', '.join(SUPPORTED_APIS)}"
            )
        adapter = await load_adapter(module)
        self._events = adapter.stream(self._model, self._request)
        return await self._events.__anext__()

    async def aclose(self) -> None:
        close = getattr(self._events, "aclose", None)
        if close is not None:
            await close()


async def load_adapter(module: str) -> _Adapter:
    """The adapter module, imported in a thread the first time (an import blocks for its duration)."""
    return cast(_Adapter, await import_off_loop(f"agentforge.llm.{module}"))


async def close_clients() -> None:
    """Close every adapter's pooled SDK clients of the running loop (for callers without a runtime's
    lease; see pool.py)."""
    await close_all_clients()
