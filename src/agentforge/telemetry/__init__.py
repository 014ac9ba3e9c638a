"""Logs, metrics and traces: what the server emits so an operator can see inside it.

`logs` configures stdlib logging to render through structlog (text or JSON, secrets masked);
`metrics` holds one app's Prometheus registry; `tracing` builds the OpenTelemetry tracer provider;
`observer` (`Telemetry`) implements the session's, the writer's and the bus's seams with all three.
"""
