"""The Anthropic adapter through Amazon Bedrock, against the fake Bedrock runtime: the event-stream body
decoded into the same events as the SSE path, the SigV4-signed request, exception messages and HTTP
errors mapped to named errors, and the client's configuration."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agentforge.config import ConfigError
from agentforge.llm import anthropic_messages
from agentforge.llm import events as ev
from agentforge.llm.anthropic_messages import bedrock_region, new_client
from agentforge.llm.errors import to_named_error
from agentforge.llm.messages import ToolSpec
from agentforge.llm.provider import CloudOptions, ResolvedModel
from agentforge.llm.retry import retryable_message
from agentforge.model.errors import APIError, ContextOverflowError, ProviderAuthError
from tests.fakes.anthropic_server import AnthropicScript
from tests.fakes.bedrock_server import FakeBedrock, http_error, throttled
from tests.llm.streaming import collect, failure, hello_request

MODEL_ID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
AWS = CloudOptions(region="eu-west-3", access_key_id="AKIDFAKE", secret_access_key="fake-secret")


@pytest_asyncio.fixture
async def fake_bedrock() -> AsyncIterator[FakeBedrock]:
    async with FakeBedrock() as fake:
        yield fake
    await anthropic_messages.close_clients()


def bedrock(fake: FakeBedrock, **fields: Any) -> ResolvedModel:
    base: dict[str, Any] = {
        "provider_id": "bedrock",
        "model_id": MODEL_ID,
        "api": "anthropic-bedrock",
        "base_url": fake.base_url,
        "api_key": "",
        "headers": {},
        "timeout": 10.0,
        "limit_context": 200_000,
        "limit_output": 4096,
        "limit_input": None,
        "cloud": AWS,
    }
    return ResolvedModel(**{**base, **fields})


def kinds(events: list[ev.StreamEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


def full_script() -> AnthropicScript:
    return (
        AnthropicScript()
        .thinking("Plan it.", signature="sig-b")
        .text("Reading now")
        .tool_use("read", {"filePath": "a.txt"}, call_id="toolu_b")
        .usage(100, 30, cache_read=400, cache_write=20)
    )


def assert_full_script_events(events: list[ev.StreamEvent]) -> None:
    assert kinds(events)[:3] == ["StreamStart", "StepStart", "ReasoningStart"]
    assert "".join(e.text for e in events if isinstance(e, ev.ReasoningDelta)) == "Plan it."
    end = next(e for e in events if isinstance(e, ev.ReasoningEnd))
    assert end.metadata == {"anthropic": {"signature": "sig-b"}}
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Reading now"
    call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert (call.call_id, call.tool_name, json.loads(call.input_text)) == (
        "toolu_b",
        "read",
        {"filePath": "a.txt"},
    )
    finish = next(e for e in events if isinstance(e, ev.StepFinish))
    assert finish.finish_reason == "tool-calls"
    assert finish.usage == ev.Usage(
        input_tokens=520, output_tokens=30, cached_input_tokens=400, cache_write_tokens=20, total_tokens=550
    )
    assert kinds(events)[-1] == "StreamFinish"


async def test_event_stream_body_decodes_to_the_same_events(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(full_script())
    assert_full_script_events(await collect(bedrock(fake_bedrock)))


async def test_frames_straddling_reads_decode_the_same(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.frame_split = 5
    fake_bedrock.enqueue(full_script())
    assert_full_script_events(await collect(bedrock(fake_bedrock)))


async def test_request_is_signed_and_addresses_the_model_in_the_path(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(AnthropicScript().text("ok"))
    tool = ToolSpec("read", "Read a file", {"type": "object", "properties": {}})
    await collect(bedrock(fake_bedrock), hello_request(tools=[tool]))
    assert fake_bedrock.model_ids == [MODEL_ID]
    signed = fake_bedrock.signature(0)
    assert (signed.access_key_id, signed.region, signed.service) == ("AKIDFAKE", "eu-west-3", "bedrock")
    assert {"host", "x-amz-date"} <= set(signed.signed_headers)
    body = fake_bedrock.requests[0]
    assert "model" not in body and "stream" not in body  # both travel in the path
    assert body["anthropic_version"]  # the version goes in the body, not a header
    assert body["max_tokens"] == 4096
    assert body["tools"][0]["name"] == "read"
    assert body["messages"][0]["content"][0]["text"] == "Hi"


async def test_throttling_exception_is_a_retryable_rate_limit(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(throttled())
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, APIError) and err.data.is_retryable and err.data.status_code == 429
    assert retryable_message(err) == "Too many requests, please wait before trying again."
    assert json.loads(err.data.response_body or "") == {
        "message": "Too many requests, please wait before trying again."
    }


async def test_parts_before_an_exception_are_streamed(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(
        AnthropicScript().text("partial").error_event("stream broke", type="modelStreamErrorException")
    )
    seen: list[ev.StreamEvent] = []
    with pytest.raises(Exception) as caught:
        async for event in anthropic_messages.stream(bedrock(fake_bedrock), hello_request()):
            seen.append(event)
    assert "".join(e.text for e in seen if isinstance(e, ev.TextDelta)) == "partial"
    err = to_named_error(caught.value, provider_id="bedrock")
    assert isinstance(err, APIError) and err.data.is_retryable and err.data.message == "stream broke"


@pytest.mark.parametrize(
    ("exception_type", "message", "named"),
    [
        ("validationException", "Input is too long for requested model.", ContextOverflowError),
        ("accessDeniedException", "You don't have access to the model.", ProviderAuthError),
    ],
)
async def test_exception_messages_map_to_named_errors(
    fake_bedrock: FakeBedrock, exception_type: str, message: str, named: type
) -> None:
    fake_bedrock.enqueue(AnthropicScript().error_event(message, type=exception_type))
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, named)


@pytest.mark.parametrize(
    ("exception_type", "status"), [("validationException", 400), ("resourceNotFoundException", None)]
)
async def test_other_exceptions_are_not_retried(
    fake_bedrock: FakeBedrock, exception_type: str, status: int | None
) -> None:
    fake_bedrock.enqueue(AnthropicScript().error_event("bad request", type=exception_type))
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, APIError) and not err.data.is_retryable and err.data.status_code == status


@pytest.mark.parametrize(
    ("status", "exception_type"),
    [(429, "ThrottlingException"), (500, "InternalServerException"), (503, "ServiceUnavailableException")],
)
async def test_retryable_http_errors(fake_bedrock: FakeBedrock, status: int, exception_type: str) -> None:
    fake_bedrock.enqueue(http_error(status, exception_type, "Try again", {"retry-after": "1"}))
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, APIError) and err.data.is_retryable and err.data.status_code == status
    assert err.data.message == "Try again"


async def test_http_access_denied_is_an_auth_error(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(http_error(403, "AccessDeniedException", "not authorized to invoke"))
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, ProviderAuthError) and err.data.message == "not authorized to invoke"


async def test_http_input_too_long_is_context_overflow(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(http_error(400, "ValidationException", "Input is too long for requested model."))
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, ContextOverflowError)


async def test_a_bedrock_api_key_goes_as_a_bearer_token_not_sigv4(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(AnthropicScript().text("never"))
    model = bedrock(fake_bedrock, api_key="bedrock-api-key", cloud=CloudOptions(region="us-east-1"))
    err = to_named_error(await failure(model), provider_id="bedrock")
    assert fake_bedrock.request_headers[0]["authorization"] == "Bearer bedrock-api-key"
    assert isinstance(err, ProviderAuthError)  # this fake accepts SigV4 only: 403, as Bedrock would


async def test_dropped_connection_is_retryable(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(AnthropicScript().text("cut here").drop())
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, APIError) and err.data.is_retryable


async def test_corrupt_frame_is_a_non_retryable_error(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.corrupt_frame = 2
    fake_bedrock.enqueue(AnthropicScript().text("hello"))
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, APIError) and not err.data.is_retryable
    assert "checksum" in err.data.message


async def test_chunk_that_is_not_json_is_a_non_retryable_error(fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.enqueue(AnthropicScript().raw("{not json"))
    err = to_named_error(await failure(bedrock(fake_bedrock)), provider_id="bedrock")
    assert isinstance(err, APIError) and not err.data.is_retryable
    assert err.data.response_body == "{not json"


def test_chunk_payload_must_carry_base64_bytes() -> None:
    with pytest.raises(Exception, match="Invalid chunk"):
        anthropic_messages._chunk_bytes(b'{"bytes": "not base64!"}')
    assert anthropic_messages._chunk_bytes(b'{"bytes": "%s"}' % base64.b64encode(b"{}")) == b"{}"


def test_region_from_options_endpoint_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert bedrock_region("https://bedrock-runtime.us-west-2.amazonaws.com") == "us-west-2"
    assert bedrock_region("https://bedrock-runtime-fips.us-east-1.amazonaws.com") == "us-east-1"
    assert bedrock_region("http://127.0.0.1:9000") == "ap-south-1"
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert bedrock_region("http://127.0.0.1:9000") is None


def _model(**fields: Any) -> ResolvedModel:
    base: dict[str, Any] = {
        "provider_id": "bedrock",
        "model_id": MODEL_ID,
        "api": "anthropic-bedrock",
        "base_url": "",
        "api_key": "",
        "headers": {},
        "timeout": None,
        "limit_context": 200_000,
        "limit_output": 4096,
        "limit_input": None,
    }
    return ResolvedModel(**{**base, **fields})


def test_client_takes_region_and_keys_from_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    client = new_client(_model(cloud=AWS))
    assert client.aws_region == "eu-west-3"  # type: ignore[union-attr]
    assert client.aws_access_key == "AKIDFAKE" and client.aws_secret_key == "fake-secret"  # type: ignore[union-attr]
    assert str(client.base_url) == "https://bedrock-runtime.eu-west-3.amazonaws.com"


def test_client_without_a_region_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(ConfigError, match="no AWS region"):
        new_client(_model(cloud=CloudOptions(access_key_id="AKIDFAKE")))


def test_api_key_and_aws_credentials_together_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not both"):
        new_client(_model(api_key="bedrock-api-key", cloud=AWS))


def test_secrets_stay_out_of_repr() -> None:
    cloud = CloudOptions(
        region="us-east-1", access_key_id="AKID", secret_access_key="s3cr3t", session_token="tok"
    )
    assert "s3cr3t" not in repr(cloud) and "tok" not in repr(cloud)
    assert "s3cr3t" not in repr(_model(cloud=cloud))
