"""What a scripted turn leaves in the logs, the metrics and the traces, through real HTTP against the
wire-level fake provider."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client.parser import text_string_to_metric_families

from agentforge.model.events import Event
from agentforge.telemetry.logs import configure_logging
from agentforge.telemetry.observer import Telemetry
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.faults import invalid_api_key, rate_limited
from tests.fakes.openai_server import FakeOpenAI, Script, call

API_KEY = "sk-live-DO-NOT-LOG-4f9a2c"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN}-01"
REPLY = "The notes say: hello forge."


@dataclass
class Observed:
    live: LiveServer
    spans: InMemorySpanExporter
    logs: io.StringIO

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs.getvalue().splitlines() if line.strip()]

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging("json", "debug", stream=stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def _observed(
    tmp_path: Path, fake: FakeOpenAI, logs: io.StringIO, *, log_content: bool = False, **extra: Any
) -> AsyncIterator[Observed]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = fake_provider_config(fake)
    config["provider"]["fake"]["options"]["apiKey"] = API_KEY
    config["telemetry"] = {"log_content": log_content}
    config.update(extra)
    telemetry = Telemetry(provider=provider, log_content=log_content)
    async with start_live_server(tmp_path, fake, config, telemetry=telemetry) as live:
        yield Observed(live, exporter, logs)


@pytest_asyncio.fixture
async def observed(
    tmp_path: Path, fake_openai: FakeOpenAI, json_logs: io.StringIO
) -> AsyncIterator[Observed]:
    async for found in _observed(tmp_path, fake_openai, json_logs):
        yield found


async def _turn(observed: Observed) -> str:
    """A turn of two model calls (the first rate-limited once, then a tool call) and a reply."""
    live = observed.live
    (live.workspace / "notes.txt").write_text("hello forge\n")
    session = await live.create_session()
    live.fake.enqueue(
        rate_limited(retry_after_ms=10),
        call("read", {"filePath": "notes.txt"}),
        Script().text(REPLY).usage(120, 12).finish("stop"),
    )
    response = await live.client.post(
        f"/session/{session['id']}/message",
        json={"parts": [{"type": "text", "text": "What do my notes say?"}]},
        headers={"traceparent": TRACEPARENT, "X-Request-ID": "req-observed-1"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == "req-observed-1"
    await live.background_settled()
    session_id: str = session["id"]
    return session_id


async def test_a_turn_logs_its_fields_and_no_secret(observed: Observed) -> None:
    session_id = await _turn(observed)
    lines = observed.lines()
    every = "\n".join(json.dumps(line) for line in lines)
    assert API_KEY not in every
    assert REPLY not in every and "What do my notes say?" not in every  # content needs the opt-in
    for line in lines:
        assert {"time", "level", "logger", "message"} <= line.keys(), line

    def one(message: str) -> dict[str, Any]:
        found = [line for line in lines if line["message"] == message]
        assert found, f"no {message!r} line in:\n{every}"
        return found[0]

    started, finished = one("turn started"), one("turn finished")
    for line in (started, finished):
        assert line["request_id"] == "req-observed-1"
        assert line["tenant"] == "default"
        assert line["session_id"] == session_id
        assert line["trace_id"] == TRACE_ID  # the client's trace, carried into the turn's task
    assert finished["outcome"] == "completed" and finished["duration_ms"] > 0

    calls = [line for line in lines if line["message"] == "model call finished"]
    assert len(calls) == 2
    first, last = calls
    assert first["provider"] == "fake" and first["model"] == "test-model"
    assert first["retries"] == 1 and first["finish_reason"] == "tool-calls"
    assert last["input_tokens"] == 120 and last["output_tokens"] == 12
    assert last["latency_ms"] > 0 and last["first_token_ms"] is not None
    assert first["message_id"] != last["message_id"] and last["message_id"].startswith("msg_")
    retry = one("model call retry")
    assert retry["reason"] == "http_429" and retry["attempt"] == 1 and retry["level"] == "warning"

    tool = one("tool call finished")
    assert tool["tool"] == "read" and tool["status"] == "completed" and tool["duration_ms"] >= 0
    assert tool["session_id"] == session_id and tool["call_id"]
    assert tool["tenant"] == "default"


async def test_message_content_is_logged_only_when_opted_in(
    tmp_path: Path, fake_openai: FakeOpenAI, json_logs: io.StringIO
) -> None:
    async for observed in _observed(tmp_path, fake_openai, json_logs, log_content=True):
        await _turn(observed)
        lines = observed.lines()
        replies = [line.get("content") for line in lines if line["message"] == "model call finished"]
        assert REPLY in replies
        started = [line for line in lines if line["message"] == "tool call started"]
        assert started[0]["input"] == {"filePath": "notes.txt"}
        assert API_KEY not in observed.logs.getvalue()


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_after_a_turn(observed: Observed) -> None:
    await _turn(observed)
    response = await observed.live.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    model = {"provider": "fake", "model": "test-model"}
    assert value("agentforge_turns_started_total") == 1
    assert value("agentforge_turns_finished_total", outcome="completed") == 1
    assert value("agentforge_turn_duration_seconds_count", outcome="completed") == 1
    assert value("agentforge_model_call_duration_seconds_count", **model, outcome="ok") == 2
    assert value("agentforge_time_to_first_token_seconds_count", **model) == 2
    assert value("agentforge_tokens_total", **model, direction="input") >= 120
    assert value("agentforge_tokens_total", **model, direction="output") >= 12
    assert value("agentforge_model_retries_total", provider="fake", reason="http_429") == 1
    assert value("agentforge_tool_call_duration_seconds_count", tool="read", status="completed") == 1
    assert value("agentforge_writer_batch_seconds_count") > 0
    assert value("agentforge_active_sessions") == 0
    assert value("agentforge_writer_queue_depth") == 0
    assert value("agentforge_permission_requests_pending") == 0
    # Bounded labels: no id of a session, message or call.
    assert not any(v.startswith(("ses_", "msg_", "prt_")) for _, labels in samples for _, v in labels)


def _by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


async def test_spans_nest_under_the_clients_trace_with_genai_attributes(observed: Observed) -> None:
    session_id = await _turn(observed)
    spans = observed.finished()
    (http,) = _by_name(spans, "POST /session/{session_id}/message")
    (turn,) = _by_name(spans, "invoke_agent")
    chats = _by_name(spans, "chat test-model")
    (tool,) = _by_name(spans, "execute_tool read")
    assert http.parent is not None and format(http.parent.span_id, "016x") == PARENT_SPAN
    for span in (http, turn, *chats, tool):
        assert format(span.context.trace_id, "032x") == TRACE_ID
    assert turn.parent is not None and turn.parent.span_id == http.context.span_id
    assert len(chats) == 2 and all(
        c.parent is not None and c.parent.span_id == turn.context.span_id for c in chats
    )
    assert tool.parent is not None and tool.parent.span_id == chats[0].context.span_id

    attributes = dict(chats[1].attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.system"] == "openai"
    assert attributes["gen_ai.request.model"] == "test-model"
    assert attributes["gen_ai.usage.input_tokens"] == 120
    assert attributes["gen_ai.usage.output_tokens"] == 12
    assert attributes["gen_ai.conversation.id"] == session_id
    assert [event.name for event in chats[0].events if event.name == "retry"] == ["retry"]
    tool_attributes = dict(tool.attributes or {})
    assert tool_attributes["gen_ai.tool.name"] == "read" and tool_attributes["gen_ai.tool.call.id"]
    assert dict(http.attributes or {})["http.response.status_code"] == 200

    batches = [s for s in _by_name(spans, "store batch") if format(s.context.trace_id, "032x") == TRACE_ID]
    assert batches, "the turn's writes join its trace"
    assert all(API_KEY not in json.dumps(dict(s.attributes or {})) for s in spans)


async def test_a_request_without_traceparent_starts_its_own_trace(observed: Observed) -> None:
    response = await observed.live.client.get("/session")
    assert response.status_code == 200
    assert len(response.headers["x-request-id"]) == 32
    (span,) = _by_name(observed.finished(), "GET /session")
    assert span.parent is None


async def _scrape(live: LiveServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = await live.client.get("/metrics")
    assert response.status_code == 200
    return _samples(response.text)


async def test_permission_requests_and_refusals_are_counted_and_logged(
    tmp_path: Path, fake_openai: FakeOpenAI, json_logs: io.StringIO
) -> None:
    async for observed in _observed(tmp_path, fake_openai, json_logs, permission={"bash": "ask"}):
        live = observed.live
        session = await live.create_session()
        live.fake.enqueue(
            call("bash", {"command": "echo hi", "description": "Say hi"}),
            Script().text("Understood.").finish("stop"),
        )
        turn = asyncio.create_task(live.prompt(session["id"], "Say hi in the shell."))
        deadline = asyncio.get_running_loop().time() + 20
        while not (pending := (await live.client.get("/permission")).json()):
            assert asyncio.get_running_loop().time() < deadline, "no permission request"
            await asyncio.sleep(0.02)
        assert (await _scrape(live))[("agentforge_permission_requests_pending", frozenset())] == 1
        reply = await live.client.post(f"/permission/{pending[0]['id']}/reply", json={"reply": "reject"})
        assert reply.status_code == 200, reply.text
        assert (await turn).status_code == 200
        samples = await _scrape(live)
        assert samples[("agentforge_permission_requests_pending", frozenset())] == 0
        assert samples[("agentforge_permission_decisions_total", frozenset({("decision", "reject")}))] == 1
        refusals = frozenset({("tool", "bash"), ("by", "user")})
        assert samples[("agentforge_tool_refusals_total", refusals)] == 1

        lines = observed.lines()
        asked = [line for line in lines if line["message"] == "permission asked"]
        decided = [line for line in lines if line["message"] == "permission decided"]
        assert asked[0]["permission"] == "bash" and asked[0]["session_id"] == session["id"]
        assert decided[0]["decision"] == "reject" and decided[0]["tenant"] == "default"
        (tool,) = [line for line in lines if line["message"] == "tool call finished"]
        assert tool["status"] == "error" and tool["refused_by"] == "user" and tool["level"] == "warning"


async def test_a_lagging_subscriber_is_counted_and_logged(observed: Observed) -> None:
    bus = observed.live.runtime.bus
    subscription = bus.subscribe(buffer=1)
    for _ in range(2):
        bus.publish(Event(type="session.idle", properties={}, session_id="ses_x", tenant_id="default"))
    assert subscription.lagged
    samples = await _scrape(observed.live)
    assert samples[("agentforge_bus_lagged_subscribers_total", frozenset())] == 1
    (line,) = [line for line in observed.lines() if line["logger"] == "agentforge.bus"]
    assert line["level"] == "warning" and line["session_id"] == "ses_x"


async def test_a_failed_model_call_ends_the_turn_as_an_error_everywhere(observed: Observed) -> None:
    live = observed.live
    session = await live.create_session()
    live.fake.enqueue(invalid_api_key())
    response = await live.prompt(session["id"], "hello")
    assert response.status_code == 200 and response.json()["info"]["error"]["name"] == "ProviderAuthError"

    samples = await _scrape(live)
    assert samples[("agentforge_turns_finished_total", frozenset({("outcome", "error")}))] == 1
    labels = frozenset({("provider", "fake"), ("model", "test-model"), ("outcome", "ProviderAuthError")})
    assert samples[("agentforge_model_call_duration_seconds_count", labels)] == 1

    lines = observed.lines()
    (turn,) = [line for line in lines if line["message"] == "turn finished"]
    assert turn["outcome"] == "error" and turn["level"] == "warning"
    (model,) = [line for line in lines if line["message"] == "model call finished"]
    assert model["error"] == "ProviderAuthError" and model["level"] == "warning"
    assert API_KEY not in observed.logs.getvalue()

    (chat,) = _by_name(observed.finished(), "chat test-model")
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == "ProviderAuthError"


def test_a_tool_call_names_its_tenant_without_a_turn_around_it(json_logs: io.StringIO) -> None:
    """The tool call binds its tenant itself, as the turn and the model call do, rather than
    relying on a turn's context around it (a fresh context here: nothing else binds it)."""
    telemetry = Telemetry(provider=TracerProvider())

    def call() -> None:
        with telemetry.tool_call("tenant-a", "ses_1", "msg_1", "call_1", "read", {}) as observed:
            observed.finish("completed")

    contextvars.Context().run(call)

    lines = [json.loads(line) for line in json_logs.getvalue().splitlines() if line.strip()]
    for message in ("tool call started", "tool call finished"):
        (line,) = [line for line in lines if line["message"] == message]
        assert line["tenant"] == "tenant-a" and line["session_id"] == "ses_1" and line["call_id"] == "call_1"
