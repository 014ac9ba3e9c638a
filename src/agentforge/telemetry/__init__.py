"""Logs, metrics and traces: what the server emits so an operator can see inside it.

`logs` configures stdlib logging to render through structlog (text or JSON, secrets masked);
`metrics` holds one app's Prometheus registry; `tracing` builds the OpenTelemetry tracer provider;
`observer` (`Telemetry`) implements the session's, the writer's and the bus's seams with all three.
"""

from __future__ import annotations

import sys


def _import_structlog_without_rich() -> None:
    """structlog imports rich, when it is installed (the CLI's dependency), for tracebacks we never
    render: logs.py formats them plain. That is ~4 MB resident in every server (rich, pygments,
    attrs); the CLI imports rich itself when it draws."""
    if "rich" in sys.modules or "structlog" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # makes `import rich` raise ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_import_structlog_without_rich()
