"""Exception handlers: every failure answers JSON `{name, data: {message}}` with a fitting status."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentforge.config.errors import ConfigError
from agentforge.runtime.scope import TenantScopeError
from agentforge.server.responses import WireResponse, error_body
from agentforge.server.unsupported import not_offered
from agentforge.session.errors import InvalidInputError, NotFoundError
from agentforge.session.events import MessageIdTakenError, PartIdTakenError
from agentforge.session.runner import SessionBusyError, ShuttingDownError
from agentforge.snapshot.repo import SnapshotError
from agentforge.store.errors import ClusterUnavailableError
from agentforge.terminal.registry import TerminalNotFoundError, TooManyTerminalsError
from agentforge.tools.confinement import ShellNotAllowedError
from agentforge.workspace.access import OutsideWorkspaceError
from agentforge.workspace.files import FileTooLargeError
from agentforge.workspace.search import InvalidPatternError, SearchUnavailableError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An answer decided by the HTTP layer itself (authentication, authorisation): status, error name,
    a message saying what is missing, and extra response headers (e.g. WWW-Authenticate)."""

    def __init__(
        self, status: int, name: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.name = name
        self.headers = headers or {}


def _describe(errors: list[dict[str, object]]) -> str:
    parts = []
    for error in errors:
        location = ".".join(str(item) for item in error.get("loc", ()) if item != "body")  # type: ignore[attr-defined]
        parts.append(f"{location or 'body'}: {error.get('msg')}")
    return "Invalid request: " + "; ".join(parts)


def _no_route(request: Request) -> WireResponse:
    """A path no route serves: an opencode route deliberately not offered (501, saying why), or an
    unknown one (404, naming it)."""
    method, path = request.method, request.url.path
    why = not_offered(method, path)
    if why is not None:
        return WireResponse(error_body("UnsupportedError", why), status_code=501)
    return WireResponse(error_body("NotFoundError", f"No route {method} {path}"), status_code=404)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> WireResponse:
        return WireResponse(error_body(exc.name, str(exc)), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(NotFoundError)
    async def not_found(_request: Request, exc: NotFoundError) -> WireResponse:
        return WireResponse(error_body("NotFoundError", str(exc)), status_code=404)

    @app.exception_handler(MessageIdTakenError)
    async def taken(_request: Request, exc: MessageIdTakenError) -> WireResponse:
        return WireResponse(error_body("BadRequestError", str(exc)), status_code=400)

    @app.exception_handler(PartIdTakenError)
    async def part_taken(_request: Request, exc: PartIdTakenError) -> WireResponse:
        return WireResponse(error_body("BadRequestError", str(exc)), status_code=400)

    @app.exception_handler(InvalidInputError)
    async def invalid(_request: Request, exc: InvalidInputError) -> WireResponse:
        return WireResponse(error_body("BadRequestError", str(exc)), status_code=400)

    @app.exception_handler(ShellNotAllowedError)
    async def shell_not_allowed(_request: Request, exc: ShellNotAllowedError) -> WireResponse:
        return WireResponse(error_body("ForbiddenError", str(exc)), status_code=403)

    @app.exception_handler(TerminalNotFoundError)
    async def terminal_not_found(_request: Request, exc: TerminalNotFoundError) -> WireResponse:
        return WireResponse(error_body("NotFoundError", str(exc)), status_code=404)

    @app.exception_handler(TooManyTerminalsError)
    async def too_many_terminals(_request: Request, exc: TooManyTerminalsError) -> WireResponse:
        return WireResponse(error_body("TooManyTerminalsError", str(exc)), status_code=429)

    @app.exception_handler(OutsideWorkspaceError)
    async def outside_workspace(_request: Request, exc: OutsideWorkspaceError) -> WireResponse:
        return WireResponse(error_body("ForbiddenError", str(exc)), status_code=403)

    @app.exception_handler(FileNotFoundError)
    async def file_not_found(_request: Request, exc: FileNotFoundError) -> WireResponse:
        return WireResponse(error_body("NotFoundError", str(exc)), status_code=404)

    @app.exception_handler(SnapshotError)
    async def snapshot_failed(_request: Request, exc: SnapshotError) -> WireResponse:
        # The workspace changed under the snapshot (a directory swapped meanwhile, say): try again.
        return WireResponse(error_body("SnapshotError", str(exc)), status_code=409)

    @app.exception_handler(FileTooLargeError)
    async def file_too_large(_request: Request, exc: FileTooLargeError) -> WireResponse:
        return WireResponse(error_body("FileTooLargeError", str(exc)), status_code=413)

    @app.exception_handler(InvalidPatternError)
    async def invalid_pattern(_request: Request, exc: InvalidPatternError) -> WireResponse:
        return WireResponse(error_body("BadRequestError", f"pattern: {exc}"), status_code=400)

    @app.exception_handler(SearchUnavailableError)
    async def search_unavailable(_request: Request, exc: SearchUnavailableError) -> WireResponse:
        return WireResponse(error_body("SearchUnavailableError", str(exc)), status_code=503)

    @app.exception_handler(SessionBusyError)
    async def busy(_request: Request, exc: SessionBusyError) -> WireResponse:
        body = error_body("SessionBusyError", str(exc), sessionID=exc.session_id)
        return WireResponse(body, status_code=409)

    @app.exception_handler(ShuttingDownError)
    async def shutting_down(_request: Request, exc: ShuttingDownError) -> WireResponse:
        body = error_body("ShuttingDownError", str(exc))
        return WireResponse(body, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(ClusterUnavailableError)
    async def cluster_unavailable(_request: Request, exc: ClusterUnavailableError) -> WireResponse:
        # This replica lost its lease connection: another replica can serve the request.
        body = error_body("ClusterUnavailableError", str(exc))
        return WireResponse(body, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(ConfigError)
    async def config_broken(_request: Request, exc: ConfigError) -> WireResponse:
        # Found only when used (a provider's options): the server's fault, said so it can be fixed.
        return WireResponse(error_body("ConfigError", str(exc)), status_code=500)

    @app.exception_handler(TenantScopeError)
    async def tenant_unavailable(_request: Request, exc: TenantScopeError) -> WireResponse:
        # The tenant's own config (overlay, roots) is broken: the server's fault, said plainly.
        return WireResponse(error_body("TenantConfigError", str(exc)), status_code=500)

    @app.exception_handler(RequestValidationError)
    async def validation(_request: Request, exc: RequestValidationError) -> WireResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()
        ]
        body = {**error_body("ValidationError", _describe(errors)), "errors": errors, "success": False}
        return WireResponse(body, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> WireResponse:
        if exc.status_code == 404 and "endpoint" not in request.scope:
            return _no_route(request)
        name = "NotFoundError" if exc.status_code == 404 else "HTTPError"
        return WireResponse(error_body(name, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> WireResponse:
        log.exception("unhandled error")
        return WireResponse(
            error_body("UnknownError", f"Internal error: {type(exc).__name__}"), status_code=500
        )
