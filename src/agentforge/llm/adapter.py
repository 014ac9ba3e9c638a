"""The one entry point for a model call: picks the adapter for the model's wire protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentforge.llm import openai_chat
from agentforge.llm.events import StreamEvent
from agentforge.llm.messages import ModelRequest
from agentforge.llm.provider import ResolvedModel

SUPPORTED_APIS = ("openai",)


class UnsupportedApiError(Exception):
    """The model's provider speaks a wire protocol we have no adapter for."""


async def stream(model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Our stream events for one model call.

    Consume it under `contextlib.aclosing(...)`: leaving the loop early (or being cancelled between
    events) then closes the HTTP response at once instead of whenever the generator is collected.
    Errors propagate as raised; map them with `agentforge.llm.errors.to_named_error`.
    """
    if model.api == "openai":
        async for event in openai_chat.stream(model, request):
            yield event
        return
    raise UnsupportedApiError(
        f"Provider {model.provider_id} uses api {model.api!r}; supported: {', '.join(SUPPORTED_APIS)}"
    )
