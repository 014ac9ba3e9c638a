"""One app's Prometheus metrics, in a registry of its own (tests build many apps in one process).

Labels are bounded: outcomes, statuses, providers, models and tools come from the code and the
config, never from a request; no session, message or tenant id is a label.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Seconds: from a fast tool or a cached reply to a long agentic turn.
_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_TURN = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_BATCH = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns_started = Counter("agentforge_turns_started", "Turns started.", registry=r)
        self.turns_finished = Counter(
            "agentforge_turns_finished", "Turns finished, by outcome.", ["outcome"], registry=r
        )
        self.turn_seconds = Histogram(
            "agentforge_turn_duration_seconds", "Turn duration.", ["outcome"], buckets=_TURN, registry=r
        )
        model = ["provider", "model"]
        self.model_call_seconds = Histogram(
            "agentforge_model_call_duration_seconds",
            "One model call (one assistant message, retries included).",
            [*model, "outcome"],
            buckets=_LATENCY,
            registry=r,
        )
        self.first_token_seconds = Histogram(
            "agentforge_time_to_first_token_seconds",
            "From the start of a model call to its first streamed content.",
            model,
            buckets=_LATENCY,
            registry=r,
        )
        self.tokens = Counter(
            "agentforge_tokens",
            "Tokens, by provider, model and direction.",
            [*model, "direction"],
            registry=r,
        )
        self.cost = Counter("agentforge_cost_usd", "Cost in USD, by provider and model.", model, registry=r)
        self.retries = Counter(
            "agentforge_model_retries", "Model call retries, by reason.", ["provider", "reason"], registry=r
        )
        self.tool_seconds = Histogram(
            "agentforge_tool_call_duration_seconds",
            "Tool call duration, by tool and final status.",
            ["tool", "status"],
            buckets=_LATENCY,
            registry=r,
        )
        self.tool_refusals = Counter(
            "agentforge_tool_refusals", "Tool calls refused, by tool and by whom.", ["tool", "by"], registry=r
        )
        self.permission_decisions = Counter(
            "agentforge_permission_decisions",
            "Permission requests decided, by decision (once, always, reject, timeout, policy).",
            ["decision"],
            registry=r,
        )
        self.bus_lags = Counter(
            "agentforge_bus_lagged_subscribers", "Subscribers cut off for falling behind.", registry=r
        )
        self.writer_batch_seconds = Histogram(
            "agentforge_writer_batch_seconds", "Store writer transaction time.", buckets=_BATCH, registry=r
        )
        self.writer_batch_size = Histogram(
            "agentforge_writer_batch_size",
            "Items per store writer transaction.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.writer_errors = Counter(
            "agentforge_writer_errors", "Store writer batches that failed.", registry=r
        )
        self.active_sessions = Gauge("agentforge_active_sessions", "Sessions running a turn.", registry=r)
        self.sse_subscribers = Gauge("agentforge_sse_subscribers", "Live event subscriptions.", registry=r)
        self.writer_queue_depth = Gauge(
            "agentforge_writer_queue_depth", "Store writes submitted and not yet committed.", registry=r
        )
        self.permissions_pending = Gauge(
            "agentforge_permission_requests_pending", "Permission requests waiting for a person.", registry=r
        )

    def watch(
        self,
        *,
        active_sessions: Callable[[], float],
        sse_subscribers: Callable[[], float],
        writer_queue_depth: Callable[[], float],
        permissions_pending: Callable[[], float],
    ) -> None:
        """Read the gauges of a running server from its state at each scrape."""
        self.active_sessions.set_function(active_sessions)
        self.sse_subscribers.set_function(sse_subscribers)
        self.writer_queue_depth.set_function(writer_queue_depth)
        self.permissions_pending.set_function(permissions_pending)

    def render(self) -> bytes:
        return generate_latest(self.registry)
