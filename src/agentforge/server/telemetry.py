"""The HTTP side of telemetry: each request gets a server span (continuing the caller's trace when it
sends a W3C `traceparent`) and a request id (the caller's `X-Request-ID` when it is a sane one),
bound for every log line written while it is handled, and by the turns it starts (their tasks copy
the request's context). The response carries the id back in `X-Request-ID`.

A plain ASGI middleware, not Starlette's BaseHTTPMiddleware: that one runs the app in another task
and buffers streaming (SSE) responses through a queue.
"""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentforge.telemetry.context import bound

REQUEST_ID_HEADER = "x-request-id"
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PROPAGATOR = TraceContextTextMapPropagator()
# The request headers read here: the request id, and the W3C trace context the propagator reads.
_READ_HEADERS = {
    b"x-request-id": REQUEST_ID_HEADER,
    b"traceparent": "traceparent",
    b"tracestate": "tracestate",
}


class TelemetryMiddleware:
    def __init__(self, app: ASGIApp, tracer: trace.Tracer) -> None:
        self.app = app
        self.tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            if (read := _READ_HEADERS.get(name)) is not None:
                headers[read] = value.decode("latin-1")  # a repeated header: its last value
        offered = headers.get(REQUEST_ID_HEADER, "")
        # 128 random bits as 32 hex digits, as OpenTelemetry draws its trace ids (not a secret).
        request_id = offered if _SANE_ID.match(offered) else f"{random.getrandbits(128):032x}"
        method = scope["method"]
        attributes = {"http.request.method": method, "url.path": scope["path"], "request.id": request_id}
        status: dict[str, Any] = {}

        # Not a coroutine: every frame of a streamed response passes here, and the awaitable of
        # `send` is handed back as it is instead of being awaited in a coroutine of its own.
        def send_with_id(message: Message) -> Awaitable[None]:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            return send(message)

        with (
            bound(request_id=request_id),
            self.tracer.start_as_current_span(
                method, context=_PROPAGATOR.extract(headers), kind=SpanKind.SERVER, attributes=attributes
            ) as span,
        ):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                _name_after_route(span, scope, method, status.get("code"))


def _name_after_route(span: trace.Span, scope: Scope, method: str, code: int | None) -> None:
    route = scope.get("route")
    template = getattr(route, "path", None)
    if isinstance(template, str):
        span.update_name(f"{method} {template}")
        span.set_attribute("http.route", template)
    if code is not None:
        span.set_attribute("http.response.status_code", code)
        if code >= 500:
            span.set_status(Status(StatusCode.ERROR))
