"""Provider faults on demand, as scripts for the fake OpenAI server (issue 5's fault matrix).

Bodies and headers are what OpenAI-compatible providers really send; retry delays come from
`retry-after-ms` so tests that exercise retries stay fast.
"""

from __future__ import annotations

from .openai_server import Script


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
