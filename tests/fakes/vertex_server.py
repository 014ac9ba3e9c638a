"""A wire-level fake of Vertex AI serving Anthropic models.

`POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:streamRawPredict`
with `Authorization: Bearer <access token>` (HTTP 401 as Google answers otherwise) streams the same SSE as
the Anthropic fake, from the same `AnthropicScript`s. The body is the Messages request without `model`,
with `anthropic_version`.

    async with FakeVertex() as fake:
        fake.enqueue(AnthropicScript().text("Hello"))
        ...  # base_url=fake.base_url, access token fake.access_token, project and region in options
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from .anthropic_server import FakeAnthropic
from .http11 import Connection, Request

_ROUTE = re.compile(
    r"/v1/projects/([^/]+)/locations/([^/]+)/publishers/anthropic/models/([^/:]+):streamRawPredict"
)


@dataclass(frozen=True, slots=True)
class VertexCall:
    project: str
    region: str
    model: str


class FakeVertex(FakeAnthropic):
    """`base_url` ends in `/v1`, as Vertex endpoints do."""

    def __init__(self, access_token: str = "ya29.fake-token") -> None:
        super().__init__()
        self.access_token = access_token
        self.calls: list[VertexCall] = []

    def _routed(self, request: Request) -> bool:
        return request.method == "POST" and _ROUTE.fullmatch(request.path) is not None

    def _model(self, request: Request, body: dict[str, Any]) -> str:
        match = _ROUTE.fullmatch(request.path)
        assert match is not None
        call = VertexCall(*(unquote(group) for group in match.groups()))
        self.calls.append(call)
        return call.model

    async def _authorized(self, conn: Connection, request: Request) -> bool:
        if request.headers.get("authorization") == f"Bearer {self.access_token}":
            return True
        body = {
            "error": {
                "code": 401,
                "message": "Request had invalid authentication credentials.",
                "status": "UNAUTHENTICATED",
            }
        }
        await conn.send_json(401, body)
        return False

    async def _send_error(self, conn: Connection, status: int, message: str) -> None:
        await conn.send_json(status, {"error": {"code": status, "message": message}})


__all__ = ["FakeVertex", "VertexCall"]
