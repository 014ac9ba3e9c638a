"""Logging for the whole process: stdlib logging (ours, uvicorn's, libraries') rendered by structlog.

Every line carries its time (UTC, ISO 8601), level and logger, the ids bound in context where known
(`request_id`, `tenant`, `session_id`, `message_id`: telemetry/context.py binds them), the current
trace and span ids, and the fields a call passes as `extra=`. Secrets never leave: values of
credential-like keys are replaced, and bearer tokens, API keys and credential query parameters are
masked wherever they appear in a line (message, fields, tracebacks).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, TextIO

import structlog
from opentelemetry import trace
from structlog.typing import Processor

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

    def replace(found: re.Match[str]) -> str:
        kept = ("scheme", "apikey", "userinfo", "param")
        prefix = next((found.group(name) for name in kept if found.group(name)), "")
        return prefix + REDACTED

    return _SECRET_TEXT.sub(replace, text)


def redact(value: Any) -> Any:
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, Mapping):
        return {
            key: REDACTED if isinstance(key, str) and _SECRET_KEY.search(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def _redact_fields(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in list(event.items()):
        if key.startswith("_"):
            continue
        event[key] = REDACTED if _SECRET_KEY.search(key) else redact(value)
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


def formatter(log_format: LogFormat) -> structlog.stdlib.ProcessorFormatter:
    """The formatter that renders any stdlib record as one structured line."""
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
