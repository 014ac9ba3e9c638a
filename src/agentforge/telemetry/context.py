"""The ids every log line of a request or a turn carries, bound in context variables.

A turn runs in its own task, created while the request that started it was being handled: the task
starts with a copy of the request's context, so its lines keep the request and tenant ids.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import structlog


def bind(**ids: str | None) -> None:
    """Bind ids for the rest of the current context (a request's task, a turn's task)."""
    structlog.contextvars.bind_contextvars(**{k: v for k, v in ids.items() if v is not None})


def bound(**ids: str | None) -> AbstractContextManager[Any]:
    """Bind ids for the inside of a `with` block."""
    return structlog.contextvars.bound_contextvars(**{k: v for k, v in ids.items() if v is not None})
