"""Azure OpenAI: the Chat Completions protocol through `AsyncAzureOpenAI`.

Azure differs only in transport: the deployment (our `request_model`) goes in the path
(`/openai/deployments/<model>/chat/completions`), the API version in the `api-version` query and the
key in an `api-key` header. The SDK's Azure client does all three, so the stream decoding of
`openai_chat` is reused unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from openai import AsyncAzureOpenAI

from agentforge.config import ConfigError
from agentforge.llm import openai_chat
from agentforge.llm.errors import MissingApiKeyError
from agentforge.llm.events import StreamEvent
from agentforge.llm.messages import ModelRequest
from agentforge.llm.pool import ClientPool
from agentforge.llm.provider import ResolvedModel
from agentforge.version import __version__

# Pooled per event loop and endpoint, for the same reasons as `openai_chat`'s clients.
_clients: ClientPool[AsyncAzureOpenAI] = ClientPool(lambda client: client.close())


def client_for(model: ResolvedModel) -> AsyncAzureOpenAI:
    if not model.api_key:
        raise MissingApiKeyError(model.provider_id, f"No API key configured for provider {model.provider_id}")
    if not model.api_version:
        raise ConfigError(f"provider {model.provider_id!r} (api azure) has no options.apiVersion")
    api_version = model.api_version
    return _clients.get(
        (model.base_url, api_version, model.api_key),
        lambda: AsyncAzureOpenAI(
            azure_endpoint=model.base_url,
            api_version=api_version,
            api_key=model.api_key,
            max_retries=0,  # the processor retries
            default_headers={"User-Agent": f"agentforge/{__version__}"},
            http_client=openai_chat.new_http_client(),  # configured as the SDK's, on the shared SSL context
        ),
    )


async def close_clients() -> None:
    """Close the pooled clients of the running loop."""
    await _clients.close()


async def stream(model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    async for event in openai_chat.stream(model, request, client_factory=client_for):
        yield event
