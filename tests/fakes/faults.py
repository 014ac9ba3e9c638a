"""Provider faults on demand, as scripts for the fake servers (issue 5's fault matrix).

The module-level functions script the fake OpenAI server; `KITS` holds the same faults for every wire
protocol. Bodies and headers are what the providers really send; retry delays come from `retry-after-ms`
so tests that exercise retries stay fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .anthropic_server import AnthropicScript, FakeAnthropic
from .gemini_server import FakeGemini, GeminiScript
from .http11 import FakeServer
from .openai_server import FakeOpenAI, Script
from .responses_server import FakeResponses, ResponsesScript


def rate_limited(*, retry_after_ms: int | None = None, retry_after: str | None = None) -> Script:
    """HTTP 429 with `retry-after-ms` and/or `retry-after` (seconds or an HTTP date)."""
    headers: dict[str, str] = {"x-ratelimit-remaining-requests": "0"}
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    if retry_after is not None:
        headers["retry-after"] = retry_after
    body = {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    return Script().error_status(429, body, headers)


def server_error(*, retry_after_ms: int) -> Script:
    body = {
        "error": {"message": "The server had an error while processing your request.", "type": "server_error"}
    }
    return Script().error_status(500, body, {"retry-after-ms": str(retry_after_ms)})


def overloaded(*, retry_after_ms: int) -> Script:
    """HTTP 529, as Anthropic (and its compatible endpoint) answers when it is overloaded."""
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return Script().error_status(529, body, {"retry-after-ms": str(retry_after_ms)})


def context_overflow() -> Script:
    body = {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130512 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    return Script().error_status(400, body)


def invalid_api_key() -> Script:
    body = {
        "error": {
            "message": "Incorrect API key provided: sk-test. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    return Script().error_status(401, body)


def dropped_after(text: str) -> Script:
    """Streams `text`, then closes the connection mid-body."""
    return Script().text(text).drop()


def malformed_after(text: str) -> Script:
    """Streams `text`, then a chunk that is not JSON."""
    return Script().text(text).raw('{"choices": [{"delta": {"content": "cut').finish()


def stalled_after(text: str, *, seconds: float = 30.0) -> Script:
    """Streams `text`, then goes silent for `seconds` (the fake gives up early if the client leaves)."""
    return Script().text(text).sleep(seconds).text(" never sent").finish()


# The same faults on every wire protocol, as each provider really sends them.


@dataclass(frozen=True, slots=True)
class FaultKit:
    """One wire protocol's fake provider and the scripts that make it fail as that provider does.

    `messages` holds, per fault, what the stored error (or the retry status) message starts with.
    Mid-stream faults stream `text` first, so the parts written before the fault can be checked.
    """

    api: str
    fake: Callable[[], FakeServer[Any]]
    reply: Callable[[str], Any]
    rate_limited: Callable[[int], Any]
    server_error: Callable[[int], Any]
    overloaded: Callable[[int], Any]
    context_overflow: Callable[[], Any]
    invalid_api_key: Callable[[], Any]
    dropped_after: Callable[[str], Any]
    malformed_after: Callable[[str], Any]
    stalled_after: Callable[[str], Any]
    error_event_after: Callable[[str], Any]  # a retryable error inside a 200 stream
    messages: dict[str, str]


SILENCE_SECONDS = 30.0  # how long a stalled fake stays silent (it gives up once the client leaves)


def _openai_kit() -> FaultKit:
    return FaultKit(
        api="openai",
        fake=FakeOpenAI,
        reply=lambda text: Script().text(text).usage(10, 5).finish(),
        rate_limited=lambda ms: rate_limited(retry_after_ms=ms),
        server_error=lambda ms: server_error(retry_after_ms=ms),
        overloaded=lambda ms: overloaded(retry_after_ms=ms),
        context_overflow=context_overflow,
        invalid_api_key=invalid_api_key,
        dropped_after=dropped_after,
        malformed_after=malformed_after,
        stalled_after=stalled_after,
        error_event_after=lambda text: (
            Script().text(text).error_event("The server is overloaded", code="overloaded")
        ),
        messages={
            "429": "Rate limit reached for requests",
            "500": "The server had an error",
            "overloaded": "Provider is overloaded",
            "context-overflow": "maximum context length",
            "invalid-key": "Incorrect API key provided",
            "error-event": "The server is overloaded",
        },
    )


def _anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _anthropic_kit() -> FaultKit:
    def status(code: int, kind: str, message: str, ms: int | None = None) -> AnthropicScript:
        headers = {"retry-after-ms": str(ms)} if ms is not None else {}
        return AnthropicScript().error_status(code, _anthropic_error(kind, message), headers)

    return FaultKit(
        api="anthropic",
        fake=FakeAnthropic,
        reply=lambda text: AnthropicScript().text(text).usage(10, 5),
        rate_limited=lambda ms: status(
            429,
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50 requests per minute.",
            ms,
        ),
        server_error=lambda ms: status(500, "api_error", "Internal server error", ms),
        overloaded=lambda ms: status(529, "overloaded_error", "Overloaded", ms),
        context_overflow=lambda: status(
            400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"
        ),
        invalid_api_key=lambda: status(401, "authentication_error", "invalid x-api-key"),
        dropped_after=lambda text: AnthropicScript().text(text).drop(),
        malformed_after=lambda text: AnthropicScript().text(text).raw('{"type": "content_block_delta", "ind'),
        stalled_after=lambda text: AnthropicScript().text(text).sleep(SILENCE_SECONDS).text(" never sent"),
        error_event_after=lambda text: AnthropicScript().text(text).error_event("Overloaded"),
        messages={
            "429": "This request would exceed the rate limit",
            "500": "Internal server error",
            "overloaded": "Provider is overloaded",
            "context-overflow": "prompt is too long",
            "invalid-key": "invalid x-api-key",
            "error-event": "Provider is overloaded",
        },
    )


def _openai_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _responses_kit() -> FaultKit:
    def status(code: int, body: dict[str, Any], ms: int | None = None) -> ResponsesScript:
        headers = {"retry-after-ms": str(ms)} if ms is not None else {}
        return ResponsesScript().error_status(code, body, headers)

    return FaultKit(
        api="openai-responses",
        fake=FakeResponses,
        reply=lambda text: ResponsesScript().text(text).with_usage(10, 5),
        rate_limited=lambda ms: status(
            429, _openai_error("Rate limit reached for requests", "requests", "rate_limit_exceeded"), ms
        ),
        server_error=lambda ms: status(
            500, _openai_error("The server had an error while processing your request.", "server_error"), ms
        ),
        overloaded=lambda ms: status(
            503,
            _openai_error("The engine is currently overloaded, please try again later.", "server_error"),
            ms,
        ),
        context_overflow=lambda: status(
            400,
            _openai_error(
                "Your input exceeds the context window of this model. "
                "Please adjust your input and try again.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
        ),
        invalid_api_key=lambda: status(
            401,
            _openai_error("Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key"),
        ),
        dropped_after=lambda text: ResponsesScript().text(text).drop(),
        malformed_after=lambda text: ResponsesScript().text(text).raw('{"type": "response.output_text.de'),
        stalled_after=lambda text: ResponsesScript().text(text).sleep(SILENCE_SECONDS).text(" never sent"),
        error_event_after=lambda text: (
            ResponsesScript().text(text).error_event("Rate limit reached for requests")
        ),
        messages={
            "429": "Rate limit reached for requests",
            "500": "The server had an error",
            "overloaded": "The engine is currently overloaded",
            "context-overflow": "Your input exceeds the context window",
            "invalid-key": "Incorrect API key provided",
            "error-event": "Rate limit reached for requests",
        },
    )


def _gemini_kit() -> FaultKit:
    def status(code: int, message: str, state: str, ms: int | None = None) -> GeminiScript:
        # Google puts its delay hint in a RetryInfo detail; the header keeps the tests' wait short.
        headers = {"retry-after-ms": str(ms)} if ms is not None else {}
        details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}] if ms else None
        return GeminiScript().error(code, message, state, headers=headers, details=details)

    return FaultKit(
        api="google",
        fake=FakeGemini,
        reply=lambda text: GeminiScript().text(text).with_usage(10, 5),
        rate_limited=lambda ms: status(
            429, "Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED", ms
        ),
        server_error=lambda ms: status(
            500, "An internal error has occurred. Please retry or report it.", "INTERNAL", ms
        ),
        overloaded=lambda ms: status(
            503, "The model is overloaded. Please try again later.", "UNAVAILABLE", ms
        ),
        context_overflow=lambda: status(
            400,
            "The input token count (1500000) exceeds the maximum number of tokens allowed (1048576).",
            "INVALID_ARGUMENT",
        ),
        invalid_api_key=lambda: status(
            400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT"
        ),
        dropped_after=lambda text: GeminiScript().text(text).drop(),
        malformed_after=lambda text: GeminiScript().text(text).raw('{"candidates": [{"content": {"par'),
        stalled_after=lambda text: GeminiScript().text(text).sleep(SILENCE_SECONDS).text(" never sent"),
        error_event_after=lambda text: (
            GeminiScript()
            .text(text)
            .error_chunk(503, "The model is overloaded. Please try again later.", "UNAVAILABLE")
        ),
        messages={
            "429": "Resource has been exhausted",
            "500": "An internal error has occurred",
            "overloaded": "The model is overloaded",
            "context-overflow": "The input token count",
            "invalid-key": "API key not valid",
            "error-event": "The model is overloaded",
        },
    )


KITS: dict[str, FaultKit] = {
    "openai": _openai_kit(),
    "anthropic": _anthropic_kit(),
    "openai-responses": _responses_kit(),
    "google": _gemini_kit(),
}
