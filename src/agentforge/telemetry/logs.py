"""Logging for the whole process: stdlib logging (ours, uvicorn's, libraries') rendered by structlog.

Every line carries its time (UTC, ISO 8601), level and logger, the ids bound in context where known
(`request_id`, `tenant`, `session_id`, `message_id`: telemetry/context.py binds them), the current
trace and span ids, and the fields a call passes as `extra=`. Secrets never leave: values of
credential-like keys are replaced, and bearer tokens, API keys and credential query parameters are
masked wherever they appear in a line (message, fields, tracebacks).
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import time
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, TextIO, cast

import structlog
from opentelemetry import trace
from structlog.typing import EventDict, Processor

LogFormat = Literal["text", "json"]
LEVELS = ("debug", "info", "warning", "error", "critical")
REDACTED = "[redacted]"

# Keys whose values are credentials, whatever they hold.
_SECRET_KEY = re.compile(
    r"(^|[_-])(authorization|api[_-]?key|apikey|token|secret|password|passwd|cookie|credentials?|ticket)$",
    re.I,
)
# Credentials inside free text: bearer/basic tokens, provider keys, our API keys
# (`afk.<tenant>.<id>.<secret>`: the secret goes), webhook secrets, JWTs, credential query parameters
# and URL userinfo passwords (`scheme://user:pass@`).
_SECRET_TEXT = re.compile(
    r"(?P<scheme>\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]+"
    r"|\b(?:sk|pk|rk|afk|xai|gsk)-[A-Za-z0-9_-]{6,}"
    r"|(?P<apikey>\bafk\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.)[A-Za-z0-9_-]+"
    r"|\bwhsec_[A-Za-z0-9+/=_-]{6,}"
    r"|\beyJ[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*"
    r"|(?P<userinfo>\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^@\s]+(?=@)"
    r"|(?P<param>\b(?:api[_-]?key|apikey|access_token|token|ticket|key|secret|password)=)[^&\s\"']+",
    re.I,
)

_HANDLER_NAME = "agentforge"
# HTTP clients that log an INFO line per request: each model call already has our own line, and
# theirs costs CPU on the turn path. Shown only at debug.
_CHATTY_LOGGERS = ("httpx", "httpx2")


def mask(text: str) -> str:
    """`text` with every credential it contains replaced."""
    if text.isascii() and not _may_hold_secret(text.lower()):
        return text
    return _SECRET_TEXT.sub(_replace_secret, text)


def _may_hold_secret(lowered: str) -> bool:
    """False when ASCII `lowered` holds none of what any match of _SECRET_TEXT holds: `bearer` or
    `basic`; the `k-` or `i-` of a provider key's prefix (sk-, pk-, rk-, afk-, gsk-, xai-); `afk.`;
    `whsec_`; a JWT's `eyj`; a URL's `://`; a query parameter's `=`. (Case-insensitive matching of
    non-ASCII text has more spellings, e.g. the Kelvin sign for k: such text always takes the regex.)
    Spelled out: one `in` each is several times faster than any() or a regex of the alternatives."""
    return (
        "=" in lowered
        or "k-" in lowered
        or "i-" in lowered
        or "://" in lowered
        or "bearer" in lowered
        or "basic" in lowered
        or "afk." in lowered
        or "whsec_" in lowered
        or "eyj" in lowered
    )


def _replace_secret(found: re.Match[str]) -> str:
    kept = ("scheme", "apikey", "userinfo", "param")
    prefix = next((found.group(name) for name in kept if found.group(name)), "")
    return prefix + REDACTED


# Longer keys are not cached: a client's logged map (POST /log) chooses its keys, and a cache of
# large ones would hold memory for as long as the server runs.
_CACHED_KEY_LENGTH = 64


def _secret_key(key: str) -> bool:
    """Whether values under `key` are credentials."""
    if len(key) > _CACHED_KEY_LENGTH:
        return _SECRET_KEY.search(key) is not None
    return _short_secret_key(key)


@functools.lru_cache(maxsize=4096)
def _short_secret_key(key: str) -> bool:
    # Keys mostly come from code and configs: few, worth caching.
    return _SECRET_KEY.search(key) is not None


# Values with nothing to mask, by exact type (bool is an int subclass; a subclass of str takes the
# general path).
_PLAIN_TYPES = frozenset({int, float, bool, type(None)})


# Short texts seen before with no credential in them, each with how a console line shows it (as
# is, or quoted): most of a line's values are ids, names and words that come back line after line.
# Texts that held a credential are never kept. Emptied when full.
_CLEAN_TEXT_LENGTH = 64
_CLEAN_TEXTS_MAX = 4096
_clean_texts: dict[str, str] = {}


def _masked(text: str) -> str:
    """`mask(text)` of an exact `str`, remembering a short one found clean."""
    masked = mask(text)
    if len(text) <= _CLEAN_TEXT_LENGTH and masked == text:
        if len(_clean_texts) >= _CLEAN_TEXTS_MAX:
            _clean_texts.clear()
        _clean_texts[text] = _console_value(text)
    return masked


def _console_value(value: Any) -> str:
    """How structlog's console renderer shows a field's value."""
    return value if type(value) is str and not _QUOTED.search(value) else repr(value)


def redact(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return value if value in _clean_texts else _masked(value)
    if kind in _PLAIN_TYPES:
        return value
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, Mapping):
        return _redact_mapping(value)
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def _redact_mapping(value: Mapping[Any, Any]) -> dict[Any, Any]:
    redacted: dict[Any, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            redacted[key] = redact(item)
            continue
        # A key can itself be a credential (a header map keyed by token, say): masked like text,
        # without two masked keys becoming one.
        shown = masked = mask(key)
        if masked != key:
            count = 1
            while shown in redacted or shown in value:
                count += 1
                shown = f"{masked} ({count})"
        redacted[shown] = REDACTED if _secret_key(key) else redact(item)
    return redacted


def _redact_fields(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in list(event.items()):
        if key.startswith("_"):
            continue
        event[key] = REDACTED if _secret_key(key) else redact(value)
    return event


def _trace_ids(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event


# `extra=` fields that are no data: uvicorn passes its message again with terminal colour codes.
_DROPPED_EXTRAS = ("color_message",)


def _drop_extras(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in _DROPPED_EXTRAS:
        event.pop(key, None)
    return event


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
        structlog.stdlib.ExtraAdder(),
        _drop_extras,
        _trace_ids,
    ]


def _structlog_formatter(log_format: LogFormat) -> structlog.stdlib.ProcessorFormatter:
    """structlog's formatter, for any record: `_LineFormatter` hands it what it does not fuse."""
    renderer: Processor
    if log_format == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        # Plain tracebacks: rich's would print every frame's locals (request bodies, keys).
        renderer = structlog.dev.ConsoleRenderer(
            colors=False,
            sort_keys=False,
            timestamp_key="time",
            exception_formatter=structlog.dev.plain_traceback,
        )
    # Tracebacks rendered to text first, in both formats, so redaction sees them.
    final: list[Processor] = [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.processors.format_exc_info,
    ]
    if log_format == "json":
        final.append(structlog.processors.EventRenamer("message"))
    final += [_redact_fields, renderer]
    return structlog.stdlib.ProcessorFormatter(foreign_pre_chain=_shared_processors(), processors=final)


def formatter(log_format: LogFormat) -> logging.Formatter:
    """The formatter that renders any stdlib record as one structured line."""
    return _LineFormatter(log_format)


# Attributes every LogRecord has: the others are the `extra=` fields (structlog's ExtraAdder's test).
_RECORD_KEYS = frozenset(logging.LogRecord("name", 0, "pathname", 0, "msg", (), None).__dict__)
_LEVEL_NAMES = {"warn": "warning", "exception": "error"}  # structlog's add_log_level
# structlog's ConsoleRenderer without colours: the level padded to its longest name ("exception"),
# the message to 30 characters; these keys are rendered by their own columns or not at all.
_LEVEL_WIDTH = 9
_EVENT_WIDTH = 30
_QUOTED = re.compile("[ \t=\r\n\"']")
# Keys structlog's renderers or exception formatting treat specially (from a bound context variable
# or an `extra=` field): such a line is left to structlog.
_NOT_FUSED = frozenset({"", "stack", "exception", "exc_info"})


class _LineFormatter(logging.Formatter):
    """structlog's formatter (`_structlog_formatter`) with its chain fused into one function for
    the records almost every line is: no exception, no stack. The same steps in the same order (the
    line is the same, field for field; tests/telemetry/test_logs.py compares the two), without
    structlog's per-record copy of the LogRecord and the generic column machinery of its console
    renderer; the time is the record's (when the line was logged, not when it was formatted: the
    same to a few microseconds). Anything else (a traceback to render, an `extra=` field a
    renderer treats specially) goes through structlog's formatter."""

    def __init__(self, log_format: LogFormat) -> None:
        super().__init__()
        self._structlog = _structlog_formatter(log_format)
        self._json = log_format == "json"
        self._dumps = structlog.processors.JSONRenderer()

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.stack_info:
            return self._structlog.format(record)
        event: EventDict = {"event": record.getMessage()}
        structlog.contextvars.merge_contextvars(None, "", event)
        level = record.levelname.lower()
        event["level"] = _LEVEL_NAMES.get(level, level)
        event["logger"] = record.name
        event["time"] = _iso_time(record.created)
        for key, value in record.__dict__.items():
            if key not in _RECORD_KEYS:
                event[key] = value
        _drop_extras(None, "", event)
        _trace_ids(None, "", event)
        if not _NOT_FUSED.isdisjoint(event):
            return self._structlog.format(record)
        if self._json:
            event["message"] = event.pop("event")
            _redact_fields(None, "", event)
            return cast(str, self._dumps(None, "", event))
        return _console_line(event)


class _Second:
    """The last second `_iso_time` spelled out (one at a time: lines come in time order, mostly)."""

    spelled: tuple[int, str] = (-1, "")


def _iso_time(created: float) -> str:
    """`created` (a record's time.time()) as structlog's TimeStamper(fmt="iso", utc=True) spells the
    current time: `2026-12-01T18:43:03.880436Z`, without the fraction when it is zero. Several times
    cheaper than a timezone-aware datetime's isoformat: the date and time of day once a second."""
    second, micro = divmod(round(created * 1_000_000), 1_000_000)
    last, prefix = _Second.spelled
    if second != last:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _Second.spelled = (second, prefix)
    return f"{prefix}.{micro:06d}Z" if micro else f"{prefix}Z"


def _console_line(event: EventDict) -> str:
    """What `_redact_fields` then structlog's ConsoleRenderer(colors=False, sort_keys=False) render
    for `event`, which holds none of the keys of `_NOT_FUSED`: redacted and shown in one pass."""
    columns: list[str] = []
    if "time" in event:
        # Masked without being remembered: a line's time is its own.
        time_value = event.pop("time")
        columns.append(str(mask(time_value) if type(time_value) is str else redact(time_value)))
    if "level" in event:
        level = str(_redacted_field("level", event.pop("level")))
        columns.append(f"[{level.ljust(_LEVEL_WIDTH)}]")
    if "event" in event:
        columns.append(str(_redacted_field("event", event.pop("event"))).ljust(_EVENT_WIDTH))
    for key in ("logger", "logger_name"):
        if key in event:
            columns.append(f"[{_redacted_field(key, event.pop(key))}]")
    clean = _clean_texts
    for key, value in event.items():
        if type(value) is str and (shown := clean.get(value)) is not None and not _secret_key(key):
            columns.append(f"{key}={shown}")  # the common case: a text seen clean before
        else:
            columns.append(f"{key}={_console_value(_redacted_field(key, value))}")
    return " ".join(column for column in columns if column).rstrip(" ")


def _redacted_field(key: str, value: Any) -> Any:
    """A field's value as `_redact_fields` leaves it."""
    if key.startswith("_"):
        return value
    return REDACTED if _secret_key(key) else redact(value)


def configure_logging(
    log_format: LogFormat = "text", level: str = "info", *, stream: TextIO | None = None
) -> logging.Handler:
    """Route every stdlib logger through one structured handler on the root logger (replacing the
    one a previous call installed) at `level`. Returns the handler (tests remove it)."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if log_format not in ("text", "json"):
        raise ValueError(f"log format must be text or json, got {log_format!r}")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter(log_format))
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's loggers propagate to the root instead of printing in their own format.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    chatty_level = logging.NOTSET if level.lower() == "debug" else logging.WARNING
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(chatty_level)
    return handler
