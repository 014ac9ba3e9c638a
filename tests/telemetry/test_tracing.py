"""Traces leave the process over OTLP/HTTP when the standard endpoint variable is set."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentforge.telemetry.tracing import records_spans, tracer_provider


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    received: list[tuple[str, bytes]] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_spans_are_exported_when_an_endpoint_is_set(
    collector: tuple[str, list[tuple[str, bytes]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    provider = tracer_provider()
    with provider.get_tracer("test").start_as_current_span("chat test-model"):
        pass
    assert provider.force_flush(10_000)
    provider.shutdown()
    (path, body), *_ = received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    (resource_spans,) = request.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert service["service.name"] == "agentforge"
    assert [span.name for scope in resource_spans.scope_spans for span in scope.spans] == ["chat test-model"]


def test_nothing_is_exported_without_an_endpoint(
    collector: tuple[str, list[tuple[str, bytes]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, received = collector
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    provider = tracer_provider()
    with provider.get_tracer("test").start_as_current_span("chat test-model") as span:
        assert span.get_span_context().is_valid  # recorded all the same: trace ids for the logs
    assert provider.force_flush(1_000)
    assert received == []


def test_without_an_exporter_spans_carry_the_callers_trace_but_record_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    provider = tracer_provider()
    assert not records_spans(provider)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    caller = TraceContextTextMapPropagator().extract({"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span("POST /session", context=caller) as request,
        tracer.start_as_current_span("invoke_agent") as turn,
    ):
        context = trace.get_current_span().get_span_context()
    assert format(context.trace_id, "032x") == trace_id  # what the log lines carry
    assert turn.get_span_context().span_id != request.get_span_context().span_id
    assert not turn.is_recording() and not request.is_recording()


def test_with_an_exporter_spans_are_recorded(
    collector: tuple[str, list[tuple[str, bytes]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector[0])
    provider = tracer_provider()
    try:
        assert records_spans(provider)
        with provider.get_tracer("test").start_as_current_span("invoke_agent") as span:
            assert span.is_recording()
    finally:
        provider.shutdown()
