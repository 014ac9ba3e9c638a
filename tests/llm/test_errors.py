"""Mapping raised exceptions to named errors (KERNEL 3.3), beyond what the adapter tests cover."""

from __future__ import annotations

import asyncio

import httpx2
import openai
import pytest

from agentforge.llm.errors import MissingApiKeyError, ProviderStreamError, is_context_overflow, to_named_error
from agentforge.model.errors import APIError, ContextOverflowError, ProviderAuthError, UnknownError
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.llm.streaming import failure, model_for

REQUEST = httpx2.Request("POST", "https://api.example.test/v1/chat/completions")


def api(error: object) -> APIError:
    assert isinstance(error, APIError), error
    return error


def test_cancellation_and_abort_flag_are_aborted() -> None:
    assert to_named_error(asyncio.CancelledError(), provider_id="p").name == "MessageAbortedError"
    # Whatever the transport raised while we were tearing the call down, an abort is an abort.
    reset = httpx2.ReadError("connection reset", request=REQUEST)
    assert to_named_error(reset, provider_id="p", aborted=True).name == "MessageAbortedError"


def test_missing_key() -> None:
    error = to_named_error(MissingApiKeyError("openai", "No API key configured"), provider_id="openai")
    assert isinstance(error, ProviderAuthError)
    assert error.wire() == {
        "name": "ProviderAuthError",
        "data": {"providerID": "openai", "message": "No API key configured"},
    }


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (
            httpx2.ReadError("[Errno 104] Connection reset by peer", request=REQUEST),
            "Connection reset by server",
        ),
        (ConnectionResetError(104, "Connection reset by peer"), "Connection reset by server"),
        (httpx2.RemoteProtocolError("peer closed connection", request=REQUEST), "Connection reset by server"),
        (httpx2.ReadTimeout("timed out", request=REQUEST), "Request timed out"),
        (openai.APITimeoutError(request=REQUEST), "Request timed out"),
        (httpx2.DecodingError("bad gzip", request=REQUEST), "Response decompression failed"),
    ],
)
def test_transport_failures_are_retryable(exc: BaseException, message: str) -> None:
    error = api(to_named_error(exc, provider_id="p"))
    assert error.data.message == message
    assert error.data.is_retryable is True
    assert error.data.status_code is None


def test_connection_error_names_its_cause() -> None:
    try:
        try:
            raise httpx2.ConnectError("[Errno 111] Connection refused", request=REQUEST)
        except httpx2.ConnectError as cause:
            raise openai.APIConnectionError(request=REQUEST) from cause
    except openai.APIConnectionError as exc:
        error = api(to_named_error(exc, provider_id="p"))
    assert error.data.message == "Cannot connect to provider: [Errno 111] Connection refused"
    assert error.data.is_retryable


def test_anything_else_is_unknown() -> None:
    error = to_named_error(ValueError("weird"), provider_id="p")
    assert isinstance(error, UnknownError)
    assert error.data.message == "weird"
    assert to_named_error(RuntimeError(), provider_id="p").wire()["data"]["message"] == "RuntimeError"


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
        "prompt is too long: 201234 tokens > 200000 maximum",
        "input is too long for requested model",
        "prompt too long; exceeded max context length by 412 tokens",
        "the request exceeds the available context size, try increasing it",
        "The number of tokens to keep from the initial prompt is greater than the context length",
        "Your input exceeds the context window of this model",
    ],
)
def test_overflow_messages(message: str) -> None:
    assert is_context_overflow(message)


def test_ordinary_messages_are_not_overflow() -> None:
    assert not is_context_overflow("Rate limit reached for gpt-4o")
    assert not is_context_overflow("Invalid schema for function 'read'")


@pytest.mark.parametrize(
    ("status", "retryable"), [(408, True), (409, True), (422, False), (502, True), (529, True)]
)
async def test_status_retryability(fake_openai: FakeOpenAI, status: int, retryable: bool) -> None:
    fake_openai.enqueue(Script().error_status(status, {"error": {"message": f"status {status}"}}))
    error = api(to_named_error(await failure(model_for(fake_openai)), provider_id="fake"))
    assert (error.data.status_code, error.data.is_retryable) == (status, retryable)
    assert error.data.message == f"status {status}"


async def test_exhausted_quota_is_not_retryable(fake_openai: FakeOpenAI) -> None:
    body = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    fake_openai.enqueue(Script().error_status(429, body))
    error = api(to_named_error(await failure(model_for(fake_openai)), provider_id="fake"))
    assert (error.data.status_code, error.data.is_retryable) == (429, False)


async def test_413_is_context_overflow(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().error_status(413, {"error": {"message": "Request Entity Too Large"}}))
    error = to_named_error(await failure(model_for(fake_openai)), provider_id="fake")
    assert isinstance(error, ContextOverflowError)


async def test_body_without_error_object_still_gives_a_message(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().error_status(503, {"message": "upstream unavailable"}))
    error = api(to_named_error(await failure(model_for(fake_openai)), provider_id="fake"))
    assert error.data.message == "upstream unavailable"
    assert error.data.is_retryable


def test_streamed_anthropic_style_error() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = api(to_named_error(ProviderStreamError("Overloaded", body=body), provider_id="p"))
    assert error.data.is_retryable
    assert error.data.message == "Overloaded"


def test_streamed_invalid_request_is_not_retryable() -> None:
    body = {"error": {"type": "invalid_request_error", "message": "bad tool"}}
    error = api(to_named_error(ProviderStreamError("bad tool", body=body), provider_id="p"))
    assert not error.data.is_retryable
