"""A tiny issuer endpoint serving a JSON Web Key Set, whose keys a test can rotate or break."""

from __future__ import annotations

from typing import Any

from .http11 import Connection, FakeServer, Request


class FakeJwks(FakeServer[None]):
    """Serves `document` at `url`; `status` other than 200 answers an error instead."""

    base_path = "/.well-known/jwks.json"

    def __init__(self) -> None:
        super().__init__()
        self.document: dict[str, Any] = {"keys": []}
        self.status = 200
        self.requests = 0

    @property
    def url(self) -> str:
        return self.base_url

    async def _respond(self, conn: Connection, request: Request) -> bool:
        self.requests += 1
        if request.path != self.base_path:
            await conn.send_json(404, {"error": "not found"})
        elif self.status != 200:
            await conn.send_json(self.status, {"error": "unavailable"})
        else:
            await conn.send_json(200, self.document)
        return True
