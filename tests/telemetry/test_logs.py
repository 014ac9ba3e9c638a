"""The log format itself: structured lines from any stdlib logger, credentials masked wherever they
appear, ids bound in context, levels and formats validated."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

from agentforge.telemetry import context, logs
from agentforge.telemetry.logs import (
    _SECRET_TEXT,
    REDACTED,
    LogFormat,
    _replace_secret,
    _structlog_formatter,
    configure_logging,
    formatter,
    mask,
)
from tests.e2e.harness import start_live_server
from tests.fakes.openai_server import FakeOpenAI

SECRET = "sk-proj-Zx81mNq0TTa9"


@pytest.fixture
def restore_root() -> Iterator[list[logging.Handler]]:
    root = logging.getLogger()
    level, installed = root.level, list[logging.Handler]()
    yield installed
    for handler in installed:
        root.removeHandler(handler)
    root.setLevel(level)


def _configure(restore_root: list[logging.Handler], log_format: str = "json") -> io.StringIO:
    stream = io.StringIO()
    restore_root.append(configure_logging("json" if log_format == "json" else "text", "debug", stream=stream))
    return stream


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_credentials_are_masked_in_messages_fields_and_tracebacks(
    restore_root: list[logging.Handler],
) -> None:
    stream = _configure(restore_root)
    log = logging.getLogger("agentforge.test")
    log.info("calling with Authorization: Bearer %s", SECRET)
    log.info("headers", extra={"headers": {"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET}})
    log.info("config", extra={"apiKey": SECRET, "provider": {"options": {"api_key": SECRET}}})
    log.info('127.0.0.1 - "GET /pty/p1/connect?ticket=%s&x=1 HTTP/1.1" 101', SECRET)
    log.info("keyed", extra={"seen": {f"Bearer {SECRET}": 1, SECRET: 2, "sk-another-key-1": 3}})
    try:
        raise RuntimeError(f"provider said: invalid key {SECRET}")
    except RuntimeError:
        log.exception("model call failed")
    text = stream.getvalue()
    assert SECRET not in text
    lines = _lines(stream)
    assert lines[0]["message"] == f"calling with Authorization: Bearer {REDACTED}"
    assert lines[1]["headers"] == {"Authorization": REDACTED, "x-api-key": REDACTED}
    assert lines[2]["apiKey"] == REDACTED and lines[2]["provider"]["options"]["api_key"] == REDACTED
    assert f"ticket={REDACTED}&x=1" in lines[3]["message"]
    # Keys are text too; two masked keys stay two entries.
    assert lines[4]["seen"] == {f"Bearer {REDACTED}": 1, REDACTED: 2, f"{REDACTED} (2)": 3}
    assert "RuntimeError" in lines[5]["exception"]


def test_token_counts_are_not_mistaken_for_tokens(restore_root: list[logging.Handler]) -> None:
    stream = _configure(restore_root)
    logging.getLogger("agentforge.test").info("usage", extra={"input_tokens": 12, "output_tokens": 3})
    (line,) = _lines(stream)
    assert line["input_tokens"] == 12 and line["output_tokens"] == 3


def test_mask_keeps_ordinary_text() -> None:
    assert mask("read notes.txt: 12 lines, task done") == "read notes.txt: 12 lines, task done"
    assert mask("Bearer abc.def") == f"Bearer {REDACTED}"


def test_bound_ids_appear_on_every_line_inside_the_block(restore_root: list[logging.Handler]) -> None:
    stream = _configure(restore_root)
    log = logging.getLogger("agentforge.test")
    with context.bound(session_id="ses_1", message_id="msg_1", tenant=None):
        log.warning("inside")
    log.warning("outside")
    inside, outside = _lines(stream)
    assert inside["session_id"] == "ses_1" and inside["message_id"] == "msg_1" and "tenant" not in inside
    assert inside["level"] == "warning" and inside["logger"] == "agentforge.test" and inside["time"]
    assert "session_id" not in outside


def test_text_format_is_one_readable_line(restore_root: list[logging.Handler]) -> None:
    stream = _configure(restore_root, "text")
    logging.getLogger("agentforge.test").info("turn finished", extra={"outcome": "completed"})
    line = stream.getvalue().strip()
    assert "turn finished" in line and "outcome=completed" in line and "[info" in line


def test_level_and_format_are_checked() -> None:
    with pytest.raises(ValueError, match="log level"):
        configure_logging("json", "loud")
    with pytest.raises(ValueError, match="log format"):
        configure_logging("xml", "info")  # type: ignore[arg-type]


async def test_access_log_lines_keep_no_query_credential(
    tmp_path: Path, fake_openai: FakeOpenAI, restore_root: list[logging.Handler]
) -> None:
    stream = _configure(restore_root)
    access_log = logging.getLogger("uvicorn.access")
    async with start_live_server(tmp_path, fake_openai) as live:
        level = access_log.level
        access_log.setLevel(logging.INFO)  # the harness serves at warning
        response = await live.client.get(f"/session?token={SECRET}", headers={"X-Request-ID": "rq-7"})
        assert response.status_code == 200
        access_log.setLevel(level)
    assert SECRET not in stream.getvalue()
    access = [line for line in _lines(stream) if line["logger"] == "uvicorn.access"]
    assert any(f"token={REDACTED}" in line["message"] for line in access), access


def test_text_format_masks_exceptions_and_prints_no_locals(restore_root: list[logging.Handler]) -> None:
    stream = _configure(restore_root, "text")
    log = logging.getLogger("agentforge.test")
    request_body = f"api_key={SECRET} plain-local-value-7f3"  # a local of the failing frame
    try:
        raise RuntimeError(f"provider refused Bearer {SECRET} for {request_body.split()[0]}")
    except RuntimeError:
        log.exception("model call failed")
    text = stream.getvalue()
    assert "RuntimeError: provider refused Bearer" in text
    assert SECRET not in text
    assert "plain-local-value-7f3" not in text  # frames' locals are not shown


@pytest.mark.parametrize(
    ("secret_text", "masked"),
    [
        ("key afk.acme.key_01HZX3.Q2hhbmdlTWUtc2VjcmV0LXZhbHVl", f"key afk.acme.key_01HZX3.{REDACTED}"),
        ("signing with whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", f"signing with {REDACTED}"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            f"jwt {REDACTED}",
        ),
        ("unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IifQ.", f"unsigned {REDACTED}"),
        (
            "connect postgresql://app:s3cr3t-Pw@db.internal:5432/forge",
            f"connect postgresql://app:{REDACTED}@db.internal:5432/forge",
        ),
        ("proxy https://:hunter2@proxy.example/", f"proxy https://:{REDACTED}@proxy.example/"),
    ],
)
def test_more_credential_shapes_are_masked(secret_text: str, masked: str) -> None:
    assert mask(secret_text) == masked


def test_urls_without_credentials_are_kept() -> None:
    text = "fetched https://example.com:8443/a/b?x=1 and http://user@host/path"
    assert mask(text) == text


@pytest.mark.parametrize("client", ["httpx", "httpx2"])
def test_http_clients_request_lines_show_only_at_debug(
    client: str, restore_root: list[logging.Handler]
) -> None:
    client_log = logging.getLogger(client)
    before = client_log.level
    try:
        quiet = io.StringIO()
        restore_root.append(configure_logging("json", "info", stream=quiet))
        client_log.info('HTTP Request: POST http://model/v1/chat/completions "HTTP/1.1 200 OK"')
        client_log.warning("connection reset")
        logging.getLogger("agentforge.test").info("ours still shows")
        assert [line["message"] for line in _lines(quiet)] == ["connection reset", "ours still shows"]

        loud = io.StringIO()
        restore_root.append(configure_logging("json", "debug", stream=loud))
        client_log.info("HTTP Request: POST http://model/v1/chat/completions")
        assert [line["logger"] for line in _lines(loud)] == [client]
    finally:
        client_log.setLevel(before)


# The fused fast path of the formatter against structlog's own chain, for any record it fuses: the
# same line, field for field (the time stamp aside: each takes its own).
_FIELD_NAMES = st.sampled_from(
    ["provider", "token", "api_key", "outcome", "headers", "url", "level", "logger", "time", "event",
     "message", "trace_id", "color_message", "logger_name", "input_tokens", "x", "Authorization"]
)  # fmt: skip
_TEXTS = st.text(
    alphabet=st.sampled_from("aAbkK-=:/. \t\n\"'_sieyJ\u212a\u00e9@?&0"), max_size=40
) | st.sampled_from(
    [SECRET, f"Bearer {SECRET}", "https://u:pw@host/x", "afk.t.k.secretpart", "whsec_abcdefgh", "key=v"]
)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_FIELD_NAMES | _TEXTS, inner, max_size=3),
    max_leaves=6,
)
_FORMATTERS = {f: (formatter(f), _structlog_formatter(f)) for f in ("text", "json")}
_TRACER = TracerProvider().get_tracer("test")
# The record's own time stamp only: a generated field may hold a "time" key of its own.
_TIME = re.compile(r'^\S+Z |"time": "\d{4}-\d\d-\d\dT[\d:.]+Z"')


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    log_format=st.sampled_from(["text", "json"]),
    level=st.sampled_from([logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, 5]),
    message=_TEXTS,
    extra=st.dictionaries(_FIELD_NAMES, _VALUES, max_size=5),
    ids=st.dictionaries(st.sampled_from(["request_id", "tenant", "session_id", "token"]), _TEXTS, max_size=3),
    in_span=st.booleans(),
)
def test_the_fused_formatter_writes_what_structlog_writes(
    log_format: LogFormat,
    level: int,
    message: str,
    extra: dict[str, Any],
    ids: dict[str, str],
    in_span: bool,
) -> None:
    extra = {key: value for key, value in extra.items() if key not in ("message",)}
    record = logging.getLogger("agentforge.test").makeRecord(
        "agentforge.test", level, __file__, 1, "%s", (message,), None, extra=extra
    )
    fused, reference = _FORMATTERS[log_format]
    with context.bound(**ids), _TRACER.start_as_current_span("s") if in_span else contextlib.nullcontext():
        ours = fused.format(record)
        try:
            theirs = reference.format(record)
        except TypeError:  # structlog's console renderer fails on a non-string `level=` field
            return
    assert _TIME.sub("", ours) == _TIME.sub("", theirs)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_texts_seen_before_are_masked_every_time_and_credentials_are_never_remembered(
    restore_root: list[logging.Handler], log_format: str
) -> None:
    stream = _configure(restore_root, log_format)
    for _ in range(3):  # clean texts are remembered from the first line on
        logging.getLogger("agentforge.test").info("call", extra={"note": f"Bearer {SECRET}", "tool": "read"})
    assert SECRET not in stream.getvalue() and stream.getvalue().count("read") == 3
    assert not any(SECRET in text for text in logs._clean_texts) and "read" in logs._clean_texts


def test_a_record_with_a_traceback_is_formatted_by_structlog(restore_root: list[logging.Handler]) -> None:
    stream = _configure(restore_root, "text")
    try:
        raise ValueError(f"bad Bearer {SECRET}")
    except ValueError:
        logging.getLogger("agentforge.test").exception("failed", extra={"tool": "read"})
    text = stream.getvalue()
    assert "tool=read" in text and "ValueError: bad Bearer" in text and SECRET not in text


# Pieces of credential shapes, in other cases too (re.I matches the long s and the Kelvin sign).
_PIECES = ["Bearer ", "ba\u017fic ", "BASIC ", "sk-", "Sk-", "xai-", "afk.", "whsec_", "eyJ", ".", "://"]
_PIECES += ["=", "@", ":", "abcdef12", "\u212a-", "K", "x", " ", "-", "_", "\u00e9"]


@settings(max_examples=500, deadline=None)
@given(text=_TEXTS | st.text(max_size=30) | st.lists(st.sampled_from(_PIECES), max_size=8).map("".join))
def test_masking_skips_only_text_no_credential_pattern_matches(text: str) -> None:
    assert mask(text) == _SECRET_TEXT.sub(_replace_secret, text)


@pytest.mark.parametrize("created", [1_796_150_583.880436, 1_796_150_583.0, 1_796_150_583.9999996, 0.5])
def test_a_lines_time_is_its_records_in_utc(created: float) -> None:
    record = logging.LogRecord("agentforge.test", logging.INFO, __file__, 1, "at", (), None)
    record.created = created
    line = json.loads(formatter("json").format(record))
    expected = datetime.datetime.fromtimestamp(created, datetime.UTC).isoformat().replace("+00:00", "Z")
    assert line["time"] == expected


SERVER_IMPORTS_PROBE = (
    "import sys, json, logging\n"
    "import agentforge.cli.main, agentforge.cli.serve, agentforge.server.app\n"
    "from agentforge.telemetry.logs import configure_logging\n"
    "configure_logging('text', 'info')\n"
    "try:\n    raise ValueError('boom')\n"
    "except ValueError:\n    logging.getLogger('probe').exception('failed')\n"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'pygments', 'attr'})))"
)


def test_the_server_renders_tracebacks_without_loading_rich() -> None:
    """structlog would import rich (~4 MB resident in every server) for tracebacks the server never
    renders with it: the serve stack loads none of it, and a traceback is still written whole."""
    probe = subprocess.run(
        [sys.executable, "-c", SERVER_IMPORTS_PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(probe.stdout.splitlines()[-1]) == []
    assert "Traceback (most recent call last)" in probe.stderr
    assert "ValueError: boom" in probe.stderr
