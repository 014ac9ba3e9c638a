"""`Telemetry`: the session's, the store writer's and the bus's seams, answered with structured log
lines, Prometheus metrics and OpenTelemetry spans (GenAI semantic conventions).

Spans nest as the work does: the HTTP request's span (server/telemetry.py) is current when the turn's
task starts, the turn's span is current in the loop, model calls inside the turn, tool calls inside
the model call that asked for them, and each store batch under the context of its first write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentforge.model.events import PERMISSION_ASKED, PERMISSION_REPLIED, Event
from agentforge.session.observer import CalledModel
from agentforge.telemetry.context import bound
from agentforge.telemetry.metrics import Metrics
from agentforge.telemetry.tracing import INSTRUMENTATION, records_spans, tracer_provider

turn_log = logging.getLogger("agentforge.turn")
model_log = logging.getLogger("agentforge.model")
tool_log = logging.getLogger("agentforge.tool")
permission_log = logging.getLogger("agentforge.permission")
bus_log = logging.getLogger("agentforge.bus")

# gen_ai.system by wire protocol (OpenTelemetry GenAI semantic conventions' well-known values).
GENAI_SYSTEMS = {
    "openai": "openai",
    "openai-responses": "openai",
    "azure": "az.ai.openai",
    "anthropic": "anthropic",
    "anthropic-bedrock": "aws.bedrock",
    "anthropic-vertex": "gcp.vertex_ai",
    "google": "gcp.gemini",
}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


class _Turn:
    def __init__(self, telemetry: Telemetry, span: trace.Span) -> None:
        self._telemetry = telemetry
        self._span = span
        self._started = time.perf_counter()

    def finish(self, outcome: str) -> None:
        seconds = time.perf_counter() - self._started
        metrics = self._telemetry.metrics
        metrics.turns_finished.labels(outcome).inc()
        metrics.turn_seconds.labels(outcome).observe(seconds)
        self._span.set_attribute("agentforge.turn.outcome", outcome)
        if outcome != "completed":
            self._span.set_status(Status(StatusCode.ERROR, outcome))
        level = logging.INFO if outcome in ("completed", "aborted") else logging.WARNING
        turn_log.log(level, "turn finished", extra={"outcome": outcome, "duration_ms": seconds * 1000})


class _ModelCall:
    def __init__(self, telemetry: Telemetry, span: trace.Span, model: CalledModel) -> None:
        self._telemetry = telemetry
        self._span = span
        self._model = model
        self._started = time.perf_counter()
        self._first_token_ms: float | None = None
        self._retries = 0
        self._input = 0
        self._output = 0
        self._cost = 0.0
        self._finish_reasons: list[str] = []

    def first_token(self) -> None:
        self._first_token_ms = _ms(self._started)
        model = self._model
        self._telemetry.metrics.first_token_seconds.labels(model.provider_id, model.model_id).observe(
            self._first_token_ms / 1000
        )
        self._span.add_event("gen_ai.first_token")

    def retry(self, reason: str, attempt: int) -> None:
        self._retries = attempt
        self._telemetry.metrics.retries.labels(self._model.provider_id, reason).inc()
        self._span.add_event("retry", {"attempt": attempt, "reason": reason})
        model_log.warning(
            "model call retry",
            extra={
                "provider": self._model.provider_id,
                "model": self._model.model_id,
                "attempt": attempt,
                "reason": reason,
            },
        )

    def usage(self, input_tokens: int, output_tokens: int, cost: float, finish_reason: str) -> None:
        self._input += input_tokens
        self._output += output_tokens
        self._cost += cost
        self._finish_reasons.append(finish_reason)
        labels = (self._model.provider_id, self._model.model_id)
        metrics = self._telemetry.metrics
        metrics.tokens.labels(*labels, "input").inc(input_tokens)
        metrics.tokens.labels(*labels, "output").inc(output_tokens)
        metrics.cost.labels(*labels).inc(cost)

    def finish(self, error: str | None, content: str | None = None) -> None:
        seconds = time.perf_counter() - self._started
        model, span = self._model, self._span
        outcome = error or "ok"
        self._telemetry.metrics.model_call_seconds.labels(model.provider_id, model.model_id, outcome).observe(
            seconds
        )
        span.set_attribute("gen_ai.usage.input_tokens", self._input)
        span.set_attribute("gen_ai.usage.output_tokens", self._output)
        span.set_attribute("gen_ai.response.finish_reasons", self._finish_reasons)
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, error))
        fields: dict[str, object] = {
            "provider": model.provider_id,
            "model": model.model_id,
            "input_tokens": self._input,
            "output_tokens": self._output,
            "cost": self._cost,
            "latency_ms": seconds * 1000,
            "first_token_ms": self._first_token_ms,
            "retries": self._retries,
            "finish_reason": self._finish_reasons[-1] if self._finish_reasons else None,
            "error": error,
        }
        if content is not None:
            fields["content"] = content
        model_log.log(logging.WARNING if error else logging.INFO, "model call finished", extra=fields)


class _ToolCall:
    def __init__(self, telemetry: Telemetry, span: trace.Span, tool: str) -> None:
        self._telemetry = telemetry
        self._span = span
        self._tool = tool
        self._started = time.perf_counter()

    def finish(self, status: str, *, refused_by: str | None = None, error: str | None = None) -> None:
        seconds = time.perf_counter() - self._started
        metrics = self._telemetry.metrics
        metrics.tool_seconds.labels(self._tool, status).observe(seconds)
        if refused_by is not None:
            metrics.tool_refusals.labels(self._tool, refused_by).inc()
            self._span.set_attribute("agentforge.tool.refused_by", refused_by)
        if status != "completed":
            self._span.set_attribute("error.type", status)
            self._span.set_status(Status(StatusCode.ERROR, status))
        tool_log.log(
            logging.INFO if status == "completed" else logging.WARNING,
            "tool call finished",
            extra={
                "tool": self._tool,
                "status": status,
                "duration_ms": seconds * 1000,
                "refused_by": refused_by,
                "error": error,
            },
        )


class Telemetry:
    """One app's logs, metrics and traces. `log_content` (the config's telemetry.log_content) lets
    replies and tool inputs into logs; without it they never appear."""

    def __init__(
        self,
        *,
        metrics: Metrics | None = None,
        provider: TracerProvider | None = None,
        log_content: bool = False,
    ) -> None:
        self.metrics = metrics or Metrics()
        self.provider = provider or tracer_provider()
        self.tracer = self.provider.get_tracer(INSTRUMENTATION)
        # A store batch's span is never current (no log line carries its id): without recording,
        # it would be ids for nobody.
        self._batch_spans = records_spans(self.provider)
        self.wants_content = log_content

    # --- the session's seam ---------------------------------------------------------------------

    @contextmanager
    def turn(self, tenant_id: str, session_id: str) -> Iterator[_Turn]:
        self.metrics.turns_started.inc()
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": session_id}
        with (
            bound(tenant=tenant_id, session_id=session_id),
            self.tracer.start_as_current_span("invoke_agent", attributes=attributes) as span,
        ):
            turn_log.info("turn started")
            yield _Turn(self, span)

    @contextmanager
    def model_call(
        self, tenant_id: str, session_id: str, message_id: str, model: CalledModel
    ) -> Iterator[_ModelCall]:
        system = GENAI_SYSTEMS.get(model.api, model.api)
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": system,
            "gen_ai.provider.name": system,
            "gen_ai.request.model": model.model_id,
            "gen_ai.conversation.id": session_id,
            "agentforge.provider": model.provider_id,
            "agentforge.message_id": message_id,
        }
        with (
            bound(tenant=tenant_id, session_id=session_id, message_id=message_id),
            self.tracer.start_as_current_span(
                f"chat {model.model_id}", kind=SpanKind.CLIENT, attributes=attributes
            ) as span,
        ):
            yield _ModelCall(self, span, model)

    @contextmanager
    def tool_call(
        self, tenant_id: str, session_id: str, message_id: str, call_id: str, tool: str, tool_input: object
    ) -> Iterator[_ToolCall]:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.conversation.id": session_id,
        }
        with (
            bound(tenant=tenant_id, session_id=session_id, message_id=message_id, call_id=call_id),
            self.tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span,
        ):
            if self.wants_content:
                tool_log.info("tool call started", extra={"tool": tool, "input": tool_input})
            else:
                tool_log.debug("tool call started", extra={"tool": tool})
            yield _ToolCall(self, span, tool)

    # --- the store writer's seam ----------------------------------------------------------------

    def capture(self) -> object:
        return otel_context.get_current() if self._batch_spans else None

    def batch(self, size: int, started_ns: int, ended_ns: int, committed: bool, origin: object) -> None:
        self.metrics.writer_batch_size.observe(size)
        self.metrics.writer_batch_seconds.observe((ended_ns - started_ns) / 1e9)
        if not committed:
            self.metrics.writer_errors.inc()
        if not self._batch_spans:
            return
        parent = origin if isinstance(origin, otel_context.Context) else None
        span = self.tracer.start_span(
            "store batch", context=parent, start_time=started_ns, attributes={"agentforge.batch.size": size}
        )
        if not committed:
            span.set_status(Status(StatusCode.ERROR, "batch not committed"))
        span.end(end_time=ended_ns)

    # --- the bus's seams ------------------------------------------------------------------------

    def lagged(self, event: Event) -> None:
        self.metrics.bus_lags.inc()
        with bound(tenant=event.tenant_id, session_id=event.session_id):
            bus_log.warning("event subscriber fell behind and was cut off")

    def on_event(self, event: Event) -> None:
        if event.type == PERMISSION_REPLIED:
            props = event.properties
            decision = str(props.get("decision"))
            self.metrics.permission_decisions.labels(decision).inc()
            with bound(tenant=event.tenant_id, session_id=event.session_id):
                permission_log.info(
                    "permission decided",
                    extra={
                        "permission_id": props.get("requestID"),
                        "decision": decision,
                        "status": props.get("status"),
                        "decided_by": props.get("decidedBy"),
                    },
                )
        elif event.type == PERMISSION_ASKED:
            props = event.properties
            with bound(tenant=event.tenant_id, session_id=event.session_id):
                permission_log.info(
                    "permission asked",
                    extra={"permission_id": props.get("id"), "permission": props.get("permission")},
                )
