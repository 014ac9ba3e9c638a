"""Which failed model calls are retried, and how long to wait before the next attempt (KERNEL 5.4)."""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

from agentforge.model.errors import APIError, ContextOverflowError, NamedError, UnknownError

RETRY_INITIAL_DELAY = 2000  # ms
RETRY_BACKOFF_FACTOR = 2
RETRY_MAX_DELAY_NO_HEADERS = 30_000  # ms, cap of the computed backoff
RETRY_MAX_DELAY = 2_147_483_647  # ms, the largest timer delay; caps server-requested delays
RETRY_JITTER = 0.1  # ±10 % on computed backoff, so sessions that failed together do not retry together
RETRY_MAX_ATTEMPTS_DEFAULT = 5
_RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")


def retryable_message(err: NamedError) -> str | None:
    """The message to show while retrying, or None when `err` must not be retried."""
    if isinstance(err, ContextOverflowError):
        return None  # handled by compaction, not by retrying
    if isinstance(err, APIError):
        if not err.data.is_retryable:
            return None
        if "FreeUsageLimitError" in (err.data.response_body or ""):
            return "Free usage exceeded, add credits"
        if "Overloaded" in err.data.message:
            return "Provider is overloaded"
        return err.data.message
    if isinstance(err, UnknownError):
        return _message_from_json_error(err.data.message)
    return None


def retry_delay_ms(
    attempt: int,
    err: NamedError,
    *,
    rand: Callable[[], float] = random.random,
    now: Callable[[], float] = time.time,
) -> int:
    """Milliseconds to wait before attempt `attempt + 1` (`attempt` is 1-based): what the server asked
    for in `retry-after-ms` / `retry-after` (or Google's RetryInfo), else exponential backoff with jitter.
    `now` is the clock an HTTP-date `retry-after` is counted from (the processor's clock seam)."""
    requested = _requested_delay_ms(err, now)
    if requested is not None:
        return min(requested, RETRY_MAX_DELAY)
    exponent = min(max(attempt, 1) - 1, 30)  # past 30 the cap applies anyway
    growth: int = RETRY_BACKOFF_FACTOR**exponent
    backoff = min(RETRY_INITIAL_DELAY * growth, RETRY_MAX_DELAY_NO_HEADERS)
    jitter = 1 + RETRY_JITTER * (2 * rand() - 1)
    return round(backoff * jitter)


def _requested_delay_ms(err: NamedError, now: Callable[[], float]) -> int | None:
    if not isinstance(err, APIError):
        return None
    from_headers = _header_delay_ms(err.data.response_headers or {}, now)
    return from_headers if from_headers is not None else _google_retry_info_ms(err.data.response_body)


def _header_delay_ms(response_headers: dict[str, str], now: Callable[[], float]) -> int | None:
    headers = {name.lower(): value for name, value in response_headers.items()}
    delay_ms = _float(headers.get("retry-after-ms"))
    if delay_ms is not None and delay_ms >= 0:
        return math.ceil(delay_ms)
    retry_after = headers.get("retry-after")
    if retry_after is None:
        return None
    seconds = _float(retry_after)
    if seconds is not None:
        return math.ceil(seconds * 1000) if seconds >= 0 else None
    return _ms_until(retry_after, now)


def _google_retry_info_ms(body: str | None) -> int | None:
    """Google APIs send no retry header but a `google.rpc.RetryInfo` detail in the error body
    (`"retryDelay": "37s"`, a JSON Duration)."""
    if not body or _RETRY_INFO_TYPE not in body:
        return None
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return None
    error = parsed.get("error", parsed) if isinstance(parsed, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and detail.get("@type") == _RETRY_INFO_TYPE:
            match = _DURATION.match(str(detail.get("retryDelay") or ""))
            if match:
                return math.ceil(float(match.group(1)) * 1000)
    return None


def _ms_until(http_date: str, now: Callable[[], float]) -> int | None:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    delay = math.ceil(when.timestamp() * 1000 - now() * 1000)
    return delay if delay > 0 else None


def _float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _message_from_json_error(message: str) -> str | None:
    """Errors that reached us as JSON text (e.g. a provider error wrapped by a proxy)."""
    try:
        parsed: Any = json.loads(message)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    error = error if isinstance(error, dict) else {}
    if parsed.get("type") == "error" and error.get("type") == "too_many_requests":
        return "Too Many Requests"
    code = str(parsed.get("code") or "")
    if "exhausted" in code or "unavailable" in code:
        return "Provider is overloaded"
    if "rate_limit" in str(error.get("code") or ""):
        return "Rate Limited"
    return None
