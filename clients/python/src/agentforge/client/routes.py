"""What each SDK method sends and how it reads the answer, shared by the sync and async clients.

Each function returns a `Call`: method, path, query, JSON body and a parser for the 2xx answer. The
clients only execute calls, so both speak exactly the same protocol (KERNEL 1.1).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx2
from pydantic import TypeAdapter

from agentforge.model.message import WithParts
from agentforge.model.session import (
    PermissionRule,
    Session,
    SessionStatus,
    StatusBusy,
    StatusIdle,
    StatusRetry,
)

T = TypeVar("T")

PartInput = Mapping[str, Any]

_sessions = TypeAdapter(list[Session])
# What `GET /session/status` maps each busy session to.
LiveStatus = StatusIdle | StatusBusy | StatusRetry
_statuses: TypeAdapter[dict[str, LiveStatus]] = TypeAdapter(dict[str, SessionStatus])
_message_list = TypeAdapter(list[WithParts])

NEXT_CURSOR_HEADER = "X-Next-Cursor"


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a session's messages, oldest first; `next_cursor` fetches the page before it."""

    items: list[WithParts]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx2.Response], T]
    params: dict[str, str | int] = field(default_factory=dict)
    json: Any = None
    # A call that may last as long as a model turn: no read timeout.
    long_running: bool = False


def _session_path(session_id: str, *rest: str) -> str:
    return "/".join(["/session", quote(session_id, safe=""), *(quote(piece, safe="") for piece in rest)])


def _without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _read_json(response: httpx2.Response) -> Any:
    return response.json()


def _read_session(response: httpx2.Response) -> Session:
    return Session.model_validate(response.json())


def _read_bool(response: httpx2.Response) -> bool:
    return bool(response.json())


def _read_nothing(response: httpx2.Response) -> None:
    return None


def _read_with_parts(response: httpx2.Response) -> WithParts:
    return WithParts.model_validate(response.json())


def _read_page(response: httpx2.Response) -> Page:
    return Page(
        items=_message_list.validate_python(response.json()),
        next_cursor=response.headers.get(NEXT_CURSOR_HEADER) or None,
    )


def health() -> Call[dict[str, Any]]:
    """Liveness and the server's version."""
    return Call("GET", "/global/health", _read_json)


def create_session(
    title: str | None, parent_id: str | None, permission: Sequence[PermissionRule] | None
) -> Call[Session]:
    body = _without_none(
        {
            "title": title,
            "parentID": parent_id,
            "permission": [rule.wire() for rule in permission] if permission is not None else None,
        }
    )
    return Call("POST", "/session", _read_session, json=body)


def list_sessions(
    directory: str | None, roots: bool | None, start: int | None, search: str | None, limit: int | None
) -> Call[list[Session]]:
    params = _without_none(
        {
            "directory": directory,
            "roots": None if roots is None else str(roots).lower(),
            "start": start,
            "search": search,
            "limit": limit,
        }
    )
    return Call("GET", "/session", lambda response: _sessions.validate_python(response.json()), params=params)


def get_session(session_id: str) -> Call[Session]:
    """One session."""
    return Call("GET", _session_path(session_id), _read_session)


def update_session(
    session_id: str, title: str | None, permission: Sequence[PermissionRule] | None
) -> Call[Session]:
    body = _without_none(
        {
            "title": title,
            "permission": [rule.wire() for rule in permission] if permission is not None else None,
        }
    )
    return Call("PATCH", _session_path(session_id), _read_session, json=body)


def delete_session(session_id: str) -> Call[bool]:
    """Delete a session and its children."""
    return Call("DELETE", _session_path(session_id), _read_bool)


def status() -> Call[dict[str, LiveStatus]]:
    """The live status of busy sessions (idle ones are absent)."""
    return Call("GET", "/session/status", lambda response: _statuses.validate_python(response.json()))


def messages(session_id: str, limit: int | None, before: str | None) -> Call[Page]:
    if before is not None and limit is None:
        raise ValueError("`before` needs `limit`: a cursor continues a paged listing")
    params = _without_none({"limit": limit, "before": before})
    return Call("GET", _session_path(session_id, "message"), _read_page, params=params)


def message(session_id: str, message_id: str) -> Call[WithParts]:
    """One message with its parts."""
    return Call("GET", _session_path(session_id, "message", message_id), _read_with_parts)


def prompt(session_id: str, body: dict[str, Any]) -> Call[WithParts]:
    return Call("POST", _session_path(session_id, "message"), _read_with_parts, json=body, long_running=True)


def prompt_async(session_id: str, body: dict[str, Any]) -> Call[None]:
    return Call("POST", _session_path(session_id, "prompt_async"), _read_nothing, json=body)


def abort(session_id: str) -> Call[bool]:
    """Cancel the running turn."""
    return Call("POST", _session_path(session_id, "abort"), _read_bool)


def events_params(session_id: str | None) -> dict[str, str]:
    return {"sessionID": session_id} if session_id is not None else {}


def events_headers(last_event_id: str | None) -> dict[str, str]:
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    return headers


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def file_part(url: str, mime: str, filename: str | None = None) -> dict[str, Any]:
    return _without_none({"type": "file", "mime": mime, "url": url, "filename": filename})


def parse_model(model: str) -> dict[str, str]:
    """`"provider/model"` → `{"providerID", "modelID"}`; the model id itself may contain slashes."""
    provider_id, _, model_id = model.partition("/")
    if not provider_id or not model_id:
        raise ValueError(f"model must look like provider/model, got {model!r}")
    return {"providerID": provider_id, "modelID": model_id}


def prompt_body(
    parts: str | Sequence[PartInput],
    *,
    model: str | None,
    agent: str | None,
    system: str | None,
    no_reply: bool,
    message_id: str | None,
) -> dict[str, Any]:
    """The PromptInput JSON: a plain string becomes one text part."""
    part_list = [text_part(parts)] if isinstance(parts, str) else [dict(part) for part in parts]
    if not part_list:
        raise ValueError("a prompt needs at least one part")
    body: dict[str, Any] = {"parts": part_list}
    if model is not None:
        body["model"] = parse_model(model)
    if no_reply:
        body["noReply"] = True
    return body | _without_none({"agent": agent, "system": system, "messageID": message_id})


DEFAULT_BASE_URL = "http://127.0.0.1:4096"
DEFAULT_TIMEOUT = 30.0


ENV_API_KEY = "AGENTFORGE_API_KEY"


def resolve_token(token: str | None, api_key: str | None, *, from_env: bool) -> str | None:
    """The bearer token to send: `token` or its alias `api_key`, else (when `from_env`) the
    AGENTFORGE_API_KEY environment variable, else none."""
    if token is not None and api_key is not None and token != api_key:
        raise ValueError("give token or api_key, not both")
    chosen = token if token is not None else api_key
    if chosen is None and from_env:
        chosen = os.environ.get(ENV_API_KEY) or None
    return chosen


def client_headers(token: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"User-Agent": "agentforge-sdk", **(extra or {})}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def without_read_timeout(timeout: httpx2.Timeout) -> httpx2.Timeout:
    """For turns and event streams: connecting may time out, waiting for the next byte may not."""
    return httpx2.Timeout(connect=timeout.connect, read=None, write=timeout.write, pool=timeout.pool)
