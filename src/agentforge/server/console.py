"""The web console: `/` and its assets, built from console/ and committed under agentforge/console/.

Open like `/docs` (the page holds no data; every API call it makes carries the user's key). Served
with a strict Content-Security-Policy: scripts and styles only from this origin, no inline script,
no eval, no frames, no requests anywhere but this server, so text a model or tool wrote can never run
script even if it slipped past the sanitiser.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from agentforge.server.errors import ApiError

CONTENT_SECURITY_POLICY: Final = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "font-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    ]
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Assets keep their names between releases: revalidate every time (cheap, by ETag).
    "Cache-Control": "no-cache",
}
ASSETS: Final = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "LICENSES.txt": "text/plain; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def _load(name: str, media_type: str) -> Asset:
    body = (resources.files("agentforge.console") / name).read_bytes()
    return Asset(body, media_type, f'"{hashlib.sha256(body).hexdigest()[:32]}"')


def _respond(request: Request, asset: Asset) -> Response:
    headers = {**SECURITY_HEADERS, "ETag": asset.etag}
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


def build_router() -> APIRouter:
    """Read once when the app is built (a few hundred KB), so no request touches the disk."""
    index = _load("index.html", "text/html; charset=utf-8")
    assets = {name: _load(name, media_type) for name, media_type in ASSETS.items()}
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    async def console_page(request: Request) -> Response:
        return _respond(request, index)

    @router.get("/console/{name}")
    async def console_asset(request: Request, name: str) -> Response:
        asset = assets.get(name)
        if asset is None:
            raise ApiError(404, "NotFoundError", f"No console asset {name!r}")
        return _respond(request, asset)

    return router
