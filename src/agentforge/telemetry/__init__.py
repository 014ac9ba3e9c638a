"""Logs, metrics and traces: what the server emits so an operator can see inside it.

`logs` configures stdlib logging to render through structlog (text or JSON, secrets masked);
`metrics` holds one app's Prometheus registry; `tracing` builds the OpenTelemetry tracer provider;
`observer` (`Telemetry`) implements the session's, the writer's and the bus's seams with all three.
"""

import sys

# structlog's `dev` module (imported by `structlog` itself) loads rich, when installed, for its
# fancy tracebacks; our renderers format exceptions as plain text (logs.py), so rich would only cost
# ~4 MB resident in every server. Hidden while structlog is first imported, here since every module
# of ours that uses structlog lives in this package. The CLI still imports rich where it prints.
if "structlog" not in sys.modules and "rich" not in sys.modules:
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]
