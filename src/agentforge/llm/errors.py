"""Map whatever a model call raised to one of our named errors (KERNEL 3.3).

Adapters let transport and SDK exceptions propagate unchanged; the processor calls `to_named_error` once,
so the rules for "is this retryable, is this a context overflow" live in one place.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TYPE_CHECKING, Any

import httpx2
import orjson

if TYPE_CHECKING:
    import anthropic
    import openai
    from google.genai import errors as genai_errors

from agentforge.llm.aws_eventstream import AwsStreamException, EventStreamError
from agentforge.llm.stall import StreamStalledError
from agentforge.model.errors import (
    ContextOverflowError,
    ContextOverflowErrorData,
    NamedError,
    ProviderAuthError,
    ProviderAuthErrorData,
    aborted_error,
    api_error,
    unknown_error,
)

RETRYABLE_STATUS = frozenset({408, 409, 429})  # plus every status >= 500 (529 "overloaded" included)

# Messages providers use when the prompt does not fit the model's context window.
CONTEXT_OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"maximum context length",  # OpenAI, OpenRouter, DeepSeek, vLLM
        r"context[_ ]length[_ ]exceeded",  # OpenAI error code, generic
        r"exceeds the context window",  # OpenAI Responses API
        r"prompt is too long",  # Anthropic
        r"input is too long",  # Anthropic, Amazon Bedrock
        r"prompt too long",  # Ollama ("prompt too long; exceeded max context length")
        r"exceeds? the (available )?context (size|length)",  # llama.cpp server, Ollama
        r"greater than the context length",  # LM Studio
        r"input token count.*exceeds the maximum",  # Gemini
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq
        r"context window exceeds limit",  # MiniMax
        r"exceeded model token limit",  # Moonshot / Kimi
        r"too many tokens",  # Mistral and others
        r"request entity too large",  # HTTP 413
    )
)

# Streamed error types/codes that mean "try again later".
_RETRYABLE_STREAM_ERROR = re.compile(
    r"rate_limit|overloaded|server_error|internal|timeout|unavailable|exhausted|too_many_requests",
    re.IGNORECASE,
)


# AWS exception types (Bedrock's stream exception messages, and `x-amzn-ErrorType` on HTTP errors),
# lower-cased: those worth retrying, those that mean bad credentials, and the status each stands for.
_AWS_RETRYABLE = frozenset(
    {
        "throttlingexception",
        "internalserverexception",
        "serviceunavailableexception",
        "modelstreamerrorexception",
        "modeltimeoutexception",
        "modelnotreadyexception",
    }
)
_AWS_AUTH = frozenset(
    {
        "accessdeniedexception",
        "unrecognizedclientexception",
        "invalidsignatureexception",
        "incompletesignatureexception",
        "missingauthenticationtokenexception",
        "expiredtokenexception",
    }
)
_AWS_STATUS = {
    "throttlingexception": 429,
    "internalserverexception": 500,
    "serviceunavailableexception": 503,
    "modelstreamerrorexception": 424,
    "modeltimeoutexception": 408,
    "modelnotreadyexception": 429,
    "validationexception": 400,
}


class ProviderStreamError(Exception):
    """The provider sent an error inside a 200 stream (`data: {"error": {...}}`), or a chunk that is not
    JSON. `body` is the error object (or the raw text of an undecodable chunk)."""

    def __init__(self, message: str, *, body: dict[str, Any] | str) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class MissingApiKeyError(Exception):
    """A provider that requires a key has none configured."""

    def __init__(self, provider_id: str, message: str) -> None:
        super().__init__(message)
        self.provider_id = provider_id


def to_named_error(exc: BaseException, *, provider_id: str, aborted: bool = False) -> NamedError:
    """The named error for a failed model call. `aborted` is true when the caller cancelled the call, in
    which case whatever the transport raised on the way out does not matter."""
    if aborted or isinstance(exc, asyncio.CancelledError):
        return aborted_error()
    if isinstance(exc, MissingApiKeyError):
        return _auth_error(provider_id, str(exc))
    named = _from_sdk_error(exc, provider_id)
    if named is not None:
        return named
    if isinstance(exc, httpx2.DecodingError):
        return api_error("Response decompression failed", retryable=True)
    if isinstance(exc, httpx2.TimeoutException):
        return api_error("Request timed out", retryable=True)
    if isinstance(exc, httpx2.TransportError | ConnectionError):
        return api_error(_connection_message(exc), retryable=True)
    if isinstance(exc, StreamStalledError):
        return api_error(str(exc), retryable=True)
    if isinstance(exc, ProviderStreamError):
        return _from_stream_error(exc)
    if isinstance(exc, AwsStreamException):
        return _from_aws_exception(exc, provider_id)
    if isinstance(exc, EventStreamError):
        # Corrupt framing: the provider (or something in between) is broken; retrying would repeat it.
        return api_error(str(exc))
    return unknown_error(str(exc) or type(exc).__name__)


def _from_sdk_error(exc: BaseException, provider_id: str) -> NamedError | None:
    """A provider SDK's own error. SDKs are imported only by the adapter that uses them: one not
    loaded cannot have raised anything, so it is not imported here either."""
    openai = _imported("openai")
    if openai is not None:
        if isinstance(exc, openai.AuthenticationError):
            return _auth_error(provider_id, _status_message(exc))
        if isinstance(exc, openai.APIStatusError):
            return _from_status_error(exc)
        if isinstance(exc, openai.APIConnectionError):
            return _from_connection_error(exc)
    anthropic = _imported("anthropic")
    if anthropic is not None:
        if isinstance(exc, anthropic.AuthenticationError):
            return _auth_error(provider_id, _status_message(exc))
        if isinstance(exc, anthropic.APIStatusError):
            return _from_anthropic_status_error(exc, provider_id)
        if isinstance(exc, anthropic.APIConnectionError):
            return _from_anthropic_connection_error(exc)
    genai_errors = _imported("google.genai.errors")
    if genai_errors is not None and isinstance(exc, genai_errors.APIError):
        return _from_genai_error(exc, provider_id)
    return None


def _imported(name: str) -> Any:
    """The SDK module once its import has finished; None before (an adapter may be importing it in
    another thread right now, and a half-imported module lacks the classes)."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def is_context_overflow(message: str) -> bool:
    return any(pattern.search(message) for pattern in CONTEXT_OVERFLOW_PATTERNS)


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def _auth_error(provider_id: str, message: str) -> ProviderAuthError:
    return ProviderAuthError(data=ProviderAuthErrorData(provider_id=provider_id, message=message))


def _overflow_error(message: str, body: str | None) -> ContextOverflowError:
    return ContextOverflowError(data=ContextOverflowErrorData(message=message, response_body=body))


def _from_status_error(exc: openai.APIStatusError) -> NamedError:
    message = _status_message(exc)
    body = _response_text(exc)
    code = str(exc.code or "")
    if exc.status_code == 413 or is_context_overflow(message) or is_context_overflow(code):
        return _overflow_error(message, body)
    return api_error(
        message,
        status_code=exc.status_code,
        # A 429 for an exhausted quota (OpenAI's `insufficient_quota`) will not clear by waiting.
        retryable=is_retryable_status(exc.status_code) and code != "insufficient_quota",
        response_headers=dict(exc.response.headers.items()),
        response_body=body,
    )


def _from_anthropic_status_error(exc: anthropic.APIStatusError, provider_id: str) -> NamedError:
    message = _status_message(exc)
    if _aws_error_type(exc) in _AWS_AUTH:  # Bedrock answers bad or missing credentials with 403
        return _auth_error(provider_id, message)
    body = _response_text(exc)
    error = exc.body.get("error") if isinstance(exc.body, dict) else None
    kind = str(error.get("type") or "") if isinstance(error, dict) else ""
    if exc.status_code == 413 or is_context_overflow(message):
        return _overflow_error(message, body)
    if exc.status_code == 529 or kind == "overloaded_error":
        message = "Provider is overloaded"  # Anthropic says only "Overloaded"
    return api_error(
        message,
        status_code=exc.status_code,
        retryable=is_retryable_status(exc.status_code) or kind == "overloaded_error",
        response_headers=dict(exc.response.headers.items()),
        response_body=body,
    )


def _aws_error_type(exc: anthropic.APIStatusError) -> str:
    """The AWS error type of an HTTP error from an AWS endpoint (`x-amzn-ErrorType: Type:uri`)."""
    return exc.response.headers.get("x-amzn-errortype", "").partition(":")[0].lower()


def _from_aws_exception(exc: AwsStreamException, provider_id: str) -> NamedError:
    kind = exc.exception_type.lower()
    body = exc.payload.decode("utf-8", "replace")
    if kind in _AWS_AUTH:
        return _auth_error(provider_id, exc.message)
    if is_context_overflow(exc.message):
        return _overflow_error(exc.message, body)
    return api_error(
        exc.message,
        status_code=_AWS_STATUS.get(kind),
        retryable=kind in _AWS_RETRYABLE,
        response_body=body,
    )


def _from_anthropic_connection_error(exc: anthropic.APIConnectionError) -> NamedError:
    if isinstance(exc, sys.modules["anthropic"].APITimeoutError):
        return api_error("Request timed out", retryable=True)
    if exc.__cause__ is not None:
        return api_error(_connection_message(exc.__cause__), retryable=True)
    return api_error(exc.message or "Connection error", retryable=True)


def _from_connection_error(exc: openai.APIConnectionError) -> NamedError:
    if isinstance(exc, sys.modules["openai"].APITimeoutError):
        return api_error("Request timed out", retryable=True)
    cause = exc.__cause__
    if isinstance(cause, httpx2.ConnectError):
        return api_error(f"Cannot connect to provider: {cause}", retryable=True)
    if cause is not None:
        return api_error(_connection_message(cause), retryable=True)
    return api_error(exc.message or "Connection error", retryable=True)


def _connection_message(exc: BaseException) -> str:
    if isinstance(exc, httpx2.ConnectError):
        return f"Cannot connect to provider: {exc}"
    if isinstance(exc, httpx2.ReadError | httpx2.RemoteProtocolError | ConnectionResetError):
        return "Connection reset by server"
    return f"Connection error: {exc}" if str(exc) else "Connection error"


def _from_stream_error(exc: ProviderStreamError) -> NamedError:
    if isinstance(exc.body, str):
        # An undecodable chunk: the provider is broken, not busy; retrying would repeat it.
        return api_error(exc.message, response_body=exc.body)
    error = exc.body.get("error", exc.body)
    details = error if isinstance(error, dict) else {"message": str(error)}
    message = str(details.get("message") or exc.message)
    kind = f"{details.get('type') or ''} {details.get('code') or ''}"
    raw = orjson.dumps(exc.body).decode()
    if is_context_overflow(message) or is_context_overflow(kind):
        return _overflow_error(message, raw)
    return api_error(message, retryable=bool(_RETRYABLE_STREAM_ERROR.search(kind)), response_body=raw)


def _status_message(exc: openai.APIStatusError | anthropic.APIStatusError) -> str:
    """The provider's own message when the body has one (`{"error": {"message"}}` or `{"message"}`)."""
    body = exc.body
    if isinstance(body, dict):
        nested = body.get("error")
        candidate = nested.get("message") if isinstance(nested, dict) else body.get("message", nested)
        if isinstance(candidate, str) and candidate:
            return candidate
    if isinstance(body, str) and body.strip():
        return body.strip()
    return exc.message


def _response_text(exc: openai.APIStatusError | anthropic.APIStatusError) -> str | None:
    try:
        return exc.response.text
    except httpx2.ResponseNotRead:
        return None


def _from_genai_error(exc: genai_errors.APIError, provider_id: str) -> NamedError:
    """Gemini's `{"error": {"code", "message", "status"}}`: an invalid key is a 400 there, not a 401."""
    message = exc.message or str(exc)
    status = exc.status or ""
    body = orjson.dumps(exc.details).decode() if exc.details is not None else None
    if exc.code in (401, 403) or "API key not valid" in message or status == "UNAUTHENTICATED":
        return _auth_error(provider_id, message)
    if exc.code == 413 or is_context_overflow(message):
        return _overflow_error(message, body)
    response = exc.response
    headers = dict(response.headers.items()) if isinstance(response, httpx2.Response) else None
    return api_error(
        message,
        status_code=exc.code,
        retryable=is_retryable_status(exc.code),
        response_headers=headers,
        response_body=body,
    )
