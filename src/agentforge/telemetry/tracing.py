"""The OpenTelemetry tracer provider: spans always recorded (trace ids in the logs, `traceparent`
honoured), exported over OTLP when the standard `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` variable is
set and the optional `otlp` extra is installed."""

from __future__ import annotations

import logging
import os

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agentforge.version import __version__

log = logging.getLogger(__name__)

INSTRUMENTATION = "agentforge"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracer_provider() -> TracerProvider:
    exporting = any(os.environ.get(name) for name in _ENDPOINT_VARIABLES)
    provider = TracerProvider(
        resource=Resource.create({"service.name": "agentforge", "service.version": __version__}),
        # Flushing at exit matters only with an exporter; without one, tests' many apps would each
        # leave an exit hook behind.
        shutdown_on_exit=exporting,
    )
    if exporting:
        _add_otlp(provider)
    return provider


def _add_otlp(provider: TracerProvider) -> None:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("OTLP endpoint set but the exporter is not installed: pip install 'agentforge[otlp]'")
        return
    # Reads the endpoint, headers and timeout from the standard OTEL_EXPORTER_OTLP_* variables.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
