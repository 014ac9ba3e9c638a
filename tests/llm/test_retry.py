"""Retry policy: which errors retry, with what message, after how long (KERNEL 5.4)."""

from __future__ import annotations

import json
import time
from email.utils import formatdate

import pytest

from agentforge.llm.retry import (
    RETRY_INITIAL_DELAY,
    RETRY_MAX_ATTEMPTS_DEFAULT,
    RETRY_MAX_DELAY,
    RETRY_MAX_DELAY_NO_HEADERS,
    retry_delay_ms,
    retryable_message,
)
from agentforge.model.errors import (
    ContextOverflowError,
    ContextOverflowErrorData,
    ProviderAuthError,
    ProviderAuthErrorData,
    aborted_error,
    api_error,
    unknown_error,
)


def no_jitter() -> float:
    return 0.5  # the midpoint: jitter factor exactly 1


def test_defaults() -> None:
    assert RETRY_MAX_ATTEMPTS_DEFAULT == 5
    assert (RETRY_INITIAL_DELAY, RETRY_MAX_DELAY_NO_HEADERS) == (2000, 30_000)


def test_retryable_api_error_uses_its_message() -> None:
    assert (
        retryable_message(api_error("Rate limit reached", status_code=429, retryable=True))
        == "Rate limit reached"
    )


def test_non_retryable_api_error() -> None:
    assert retryable_message(api_error("Bad request", status_code=400)) is None


def test_overloaded_and_free_usage_messages() -> None:
    overloaded = api_error("Overloaded", status_code=529, retryable=True)
    assert retryable_message(overloaded) == "Provider is overloaded"
    free = api_error(
        "Payment", status_code=429, retryable=True, response_body='{"type":"FreeUsageLimitError"}'
    )
    assert retryable_message(free) == "Free usage exceeded, add credits"


def test_never_retried() -> None:
    overflow = ContextOverflowError(data=ContextOverflowErrorData(message="prompt is too long"))
    auth = ProviderAuthError(data=ProviderAuthErrorData(provider_id="p", message="bad key"))
    for error in (overflow, auth, aborted_error(), unknown_error("boom")):
        assert retryable_message(error) is None


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"type": "error", "error": {"type": "too_many_requests"}}, "Too Many Requests"),
        ({"code": "resource_exhausted"}, "Provider is overloaded"),
        ({"code": "service_unavailable"}, "Provider is overloaded"),
        ({"error": {"code": "rate_limit_exceeded"}}, "Rate Limited"),
        ({"error": {"code": "invalid_prompt"}}, None),
    ],
)
def test_json_messages_of_unknown_errors(payload: dict[str, object], expected: str | None) -> None:
    assert retryable_message(unknown_error(json.dumps(payload))) == expected


@pytest.mark.parametrize(
    ("attempt", "base"), [(1, 2000), (2, 4000), (3, 8000), (4, 16000), (5, 30000), (50, 30000)]
)
def test_exponential_backoff_without_headers(attempt: int, base: int) -> None:
    error = api_error("busy", status_code=503, retryable=True)
    assert retry_delay_ms(attempt, error, rand=no_jitter) == base
    assert retry_delay_ms(attempt, error, rand=lambda: 0.0) == round(base * 0.9)
    assert retry_delay_ms(attempt, error, rand=lambda: 1.0) == round(base * 1.1)


def test_jitter_stays_within_ten_percent() -> None:
    error = api_error("busy", retryable=True)
    delays = {retry_delay_ms(2, error) for _ in range(200)}
    assert all(3600 <= delay <= 4400 for delay in delays)
    assert len(delays) > 1


def test_retry_after_ms_header() -> None:
    error = api_error(
        "slow down", status_code=429, retryable=True, response_headers={"retry-after-ms": "1500.2"}
    )
    assert retry_delay_ms(1, error) == 1501


def test_retry_after_seconds_header() -> None:
    error = api_error("slow down", status_code=429, retryable=True, response_headers={"Retry-After": "7"})
    assert retry_delay_ms(3, error) == 7000


def test_retry_after_http_date_header() -> None:
    when = formatdate(time.time() + 20, usegmt=True)
    error = api_error("slow down", status_code=503, retryable=True, response_headers={"retry-after": when})
    assert 18_000 <= retry_delay_ms(1, error) <= 20_000


def test_retry_after_in_the_past_falls_back_to_backoff() -> None:
    when = formatdate(time.time() - 60, usegmt=True)
    error = api_error("slow down", status_code=503, retryable=True, response_headers={"retry-after": when})
    assert retry_delay_ms(1, error, rand=no_jitter) == 2000


def test_garbage_header_falls_back_to_backoff() -> None:
    error = api_error("slow down", status_code=503, retryable=True, response_headers={"retry-after": "soon"})
    assert retry_delay_ms(2, error, rand=no_jitter) == 4000


def test_requested_delay_is_capped() -> None:
    error = api_error("later", status_code=429, retryable=True, response_headers={"retry-after": "99999999"})
    assert retry_delay_ms(1, error) == RETRY_MAX_DELAY


def _google_error(details: list[dict[str, object]]) -> str:
    return json.dumps(
        {
            "error": {
                "code": 429,
                "message": "Quota exceeded",
                "status": "RESOURCE_EXHAUSTED",
                "details": details,
            }
        }
    )


RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


@pytest.mark.parametrize(("delay", "expected"), [("37s", 37_000), ("0.25s", 250), ("1.0005s", 1001)])
def test_google_retry_info_in_the_body(delay: str, expected: int) -> None:
    body = _google_error(
        [{"@type": "type.googleapis.com/google.rpc.QuotaFailure"}, {"@type": RETRY_INFO, "retryDelay": delay}]
    )
    err = api_error("Quota exceeded", status_code=429, retryable=True, response_body=body)
    assert retry_delay_ms(1, err, rand=no_jitter) == expected


def test_a_retry_header_wins_over_google_retry_info() -> None:
    body = _google_error([{"@type": RETRY_INFO, "retryDelay": "37s"}])
    err = api_error("x", retryable=True, response_headers={"retry-after-ms": "150"}, response_body=body)
    assert retry_delay_ms(1, err, rand=no_jitter) == 150


@pytest.mark.parametrize(
    "body",
    [
        _google_error([{"@type": RETRY_INFO, "retryDelay": "soon"}]),
        _google_error([{"@type": "type.googleapis.com/google.rpc.Help", "retryDelay": "3s"}]),
        f"not json {RETRY_INFO}",
    ],
)
def test_unusable_google_retry_info_falls_back_to_backoff(body: str) -> None:
    err = api_error("x", retryable=True, response_body=body)
    assert retry_delay_ms(1, err, rand=no_jitter) == RETRY_INITIAL_DELAY
