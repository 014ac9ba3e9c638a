"""The OpenTelemetry tracer provider: spans always carry ids (trace and span ids in the logs,
`traceparent` honoured), and are recorded and exported over OTLP when the standard
`OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` variable is set and the optional `otlp` extra is installed.
Without an exporter nothing could read a recorded span: they are sampled out (the SDK's
`ALWAYS_OFF`: non-recording spans with real ids, children of the caller's trace), which spares each
span's attributes, events and end-of-span copy."""

from __future__ import annotations

import logging
import os

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from agentforge.version import __version__

log = logging.getLogger(__name__)

INSTRUMENTATION = "agentforge"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracer_provider() -> TracerProvider:
    exporter = _otlp() if any(os.environ.get(name) for name in _ENDPOINT_VARIABLES) else None
    provider = TracerProvider(
        resource=Resource.create({"service.name": "agentforge", "service.version": __version__}),
        # Flushing at exit matters only with an exporter; without one, tests' many apps would each
        # leave an exit hook behind.
        shutdown_on_exit=exporter is not None,
        # With an exporter, the SDK's default (OTEL_TRACES_SAMPLER, else parent-based always-on).
        sampler=None if exporter is not None else ALWAYS_OFF,
    )
    if exporter is not None:
        provider.add_span_processor(exporter)
    return provider


def records_spans(provider: TracerProvider) -> bool:
    """Whether spans of `provider` can be recorded at all (False: ids only, see above)."""
    return provider.sampler is not ALWAYS_OFF


def _otlp() -> SpanProcessor | None:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("OTLP endpoint set but the exporter is not installed: pip install 'agentforge[otlp]'")
        return None
    # Reads the endpoint, headers and timeout from the standard OTEL_EXPORTER_OTLP_* variables.
    return BatchSpanProcessor(OTLPSpanExporter())
