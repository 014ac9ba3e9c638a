"""The OpenAPI contract: what FastAPI derives from the routes, made exact for generated clients.

- `/event` (and `/global/event`) answer `text/event-stream`, each frame one `Event` (a union of every
  event type, agentforge.model.event_types).
- Errors are documented as the server sends them: `{name, data: {message}}` with 400 (never FastAPI's
  422: the validation handler answers 400), 401/403 on every authenticated route, 404 where the path
  names something, 409 where a busy session refuses a change, 413 where a file can be too large.
- Security schemes: API keys (bearer, or basic as opencode's clients send them) and JWT bearer tokens.

Imported when the contract is first built (server/openapi_route.py), not when the app is.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field, RootModel, TypeAdapter

from agentforge.model.event_types import QuestionRequest, ServerEvent, Todo
from agentforge.model.session import SessionStatus

OPEN_PATHS = frozenset({"/global/health"})
# Event streams and the schema of one frame's data.
EVENT_STREAMS = {"/event": "Event", "/global/event": "GlobalEvent"}
# Operations where a busy session (a running turn) refuses the change with 409.
CONFLICTS = frozenset(
    {
        "session.prompt",
        "session.prompt_async",
        "session.command",
        "session.shell",
        "session.summarize",
        "session.deleteMessage",
        "session.revert",
        "session.unrevert",
        "part.delete",
        "part.update",
    }
)
TOO_LARGE = frozenset({"file.read"})


class ErrorData(BaseModel):
    model_config = ConfigDict(extra="allow")
    message: str = Field(description="What went wrong and, where it helps, what to do")


class ErrorBody(BaseModel):
    """Every error answer: an error name clients switch on, and a message for people."""

    model_config = ConfigDict(extra="allow")
    name: str = Field(description="BadRequestError, ValidationError, NotFoundError, SessionBusyError, …")
    data: ErrorData


class Event(RootModel[ServerEvent]):
    """One Server-Sent Event's JSON data: `{id, type, properties}`, discriminated by `type`."""


class GlobalEvent(BaseModel):
    """One frame of `/global/event`: an `Event` in opencode's global envelope."""

    directory: str
    project: str
    payload: Event


class Health(BaseModel):
    healthy: bool
    version: str


class CommandInfo(BaseModel):
    """A command a prompt can run (`/name arguments`), from config or `.agentforge/command/*.md`."""

    name: str
    source: str
    template: str
    description: str | None = None
    agent: str | None = None
    model: str | None = None
    subtask: bool | None = None
    hints: list[str] = Field(description="The placeholders the template uses ($1, $ARGUMENTS)")


class AuditRecord(BaseModel):
    tenant: str
    seq: int
    id: str
    time: int
    actor: str
    action: str
    session_id: str | None = Field(alias="sessionID")
    data: dict[str, Any]
    prev_hash: str = Field(alias="prevHash")
    row_hash: str = Field(alias="rowHash")


class AuditPage(BaseModel):
    entries: list[AuditRecord]
    next: int | None = Field(description="Pass as `after` for the next page; null at the end")


class McpServerStatus(BaseModel):
    status: str = Field(description="connected, failed or disabled")
    error: str | None = None


Object = dict[str, Any]
# Successful answers the routes send as plain JSON (WireResponse), typed here by operationId.
RESPONSE_TYPES: dict[str, Any] = {
    "global.health": Health,
    "global.ready": Object,  # {"ready", "version"}; with 503 {"ready": false, "failed": {check: why}}
    "session.status": dict[str, SessionStatus],
    "session.delete": bool,
    "session.deleteMessage": bool,
    "session.abort": bool,
    "session.summarize": bool,
    "session.todo": list[Todo],
    "part.delete": bool,
    "permission.reply": bool,
    "permission.respond": bool,
    "question.list": list[QuestionRequest],
    "question.reply": bool,
    "question.reject": bool,
    "command.list": list[CommandInfo],
    "audit.list": AuditPage,
    "config.get": Object,
    "mcp.status": dict[str, McpServerStatus],
    "provider.auth": dict[str, list[Object]],
    "experimental.resource.list": Object,
    "experimental.workspace.list": list[Object],
    "experimental.workspace.status": list[Object],
    "find.text": list[Object],
    "find.symbols": list[Object],
    "lsp.status": list[Object],
    "formatter.status": list[Object],
    "app.skills": list[Object],
}
# opencode routes this server answers with 403 only: no success to document.
ALWAYS_REFUSED = frozenset({"session.share", "config.update", "mcp.add"})


_DESCRIPTIONS = {
    "400": "Bad request: a field is missing or invalid (the message names it)",
    "401": "No valid credential (API key or token)",
    "403": "The credential may not do this (role, tenant or workspace boundary)",
    "404": "Not found (or not visible to the caller's tenant)",
    "409": "The session is busy with a turn",
    "413": "Too large to send",
}

SECURITY_SCHEMES: dict[str, Any] = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`afk.…`, from `agentforge keys create`) as `Authorization: Bearer`",
    },
    "jwt": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "A token from the configured OIDC issuer, as `Authorization: Bearer`",
    },
    "apiKeyBasic": {
        "type": "http",
        "scheme": "basic",
        "description": "An API key as the password of `Authorization: Basic` (any user name)",
    },
}


def contract(app: FastAPI) -> dict[str, Any]:
    spec = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        routes=app.routes,
        separate_input_output_schemas=True,
    )
    schemas: dict[str, Any] = spec.setdefault("components", {}).setdefault("schemas", {})
    _add_models(schemas, ErrorBody, Event, GlobalEvent)
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    spec["components"]["securitySchemes"] = SECURITY_SCHEMES
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            _type_success(schemas, operation)
            _correct(path, operation)
    return spec


def _schema_of(schemas: dict[str, Any], kind: Any) -> dict[str, Any]:
    schema: dict[str, Any] = TypeAdapter(kind).json_schema(
        ref_template="#/components/schemas/{model}", mode="serialization", by_alias=True
    )
    for name, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    return schema


def _type_success(schemas: dict[str, Any], operation: dict[str, Any]) -> None:
    operation_id = operation.get("operationId")
    if operation_id in ALWAYS_REFUSED:
        operation["responses"].pop("200", None)
        return
    if operation_id not in RESPONSE_TYPES:
        return
    ok = operation["responses"].setdefault("200", {"description": "Successful Response"})
    ok["content"] = {"application/json": {"schema": _schema_of(schemas, RESPONSE_TYPES[operation_id])}}


def _add_models(schemas: dict[str, Any], *models: type[BaseModel]) -> None:
    for model in models:
        schemas[model.__name__] = _schema_of(schemas, model)


def _correct(path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation["responses"]
    responses.pop("422", None)
    if path in EVENT_STREAMS:
        responses["200"] = {
            "description": "Server-Sent Events: `id: <seq>` on durable events, `data: <Event JSON>`",
            "content": {
                "text/event-stream": {"schema": {"$ref": f"#/components/schemas/{EVENT_STREAMS[path]}"}}
            },
        }
    statuses = ["400"]
    if path not in OPEN_PATHS:
        statuses += ["401", "403"]
        operation["security"] = [{"apiKey": []}, {"jwt": []}, {"apiKeyBasic": []}]
    if "{" in path:
        statuses.append("404")
    if operation.get("operationId") in CONFLICTS:
        statuses.append("409")
    if operation.get("operationId") in TOO_LARGE:
        statuses.append("413")
    for status in statuses:
        responses.setdefault(status, {"description": _DESCRIPTIONS[status]})
        responses[status]["content"] = {
            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
        }
