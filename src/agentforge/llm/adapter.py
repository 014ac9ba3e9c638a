"""The one entry point for a model call: picks the adapter for the model's wire protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentforge.llm import anthropic_messages, azure_openai, google_gemini, openai_chat, openai_responses
from agentforge.llm.events import StreamEvent
from agentforge.llm.messages import ModelRequest
from agentforge.llm.pool import close_all_clients
from agentforge.llm.provider import ResolvedModel

SUPPORTED_APIS = ("openai", "azure", "openai-responses", "google", *anthropic_messages.ANTHROPIC_APIS)


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
    if model.api == "azure":
        async for event in azure_openai.stream(model, request):
            yield event
        return
    if model.api == "openai-responses":
        async for event in openai_responses.stream(model, request):
            yield event
        return
    if model.api == "google":
        async for event in google_gemini.stream(model, request):
            yield event
        return
    if model.api in anthropic_messages.ANTHROPIC_APIS:
        async for event in anthropic_messages.stream(model, request):
            yield event
        return
    raise UnsupportedApiError(
        f"Provider {model.provider_id} uses api {model.api!r}; supported: {', '.join(SUPPORTED_APIS)}"
    )


async def close_clients() -> None:
    """Close every adapter's pooled SDK clients of the running loop (for callers without a runtime's
    lease; see pool.py)."""
    await close_all_clients()
