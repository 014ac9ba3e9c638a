"""The SDK's resource namespaces (`forge.sessions`, `forge.messages`, …), defined once for both clients.

Each method is an `Endpoint`: a function that builds a `Call` (routes.py). Read from a namespace of
the sync client it runs the call and returns the result; from the async client it returns an
awaitable. The mode is the namespace's type parameter, so both are typed from this one definition.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, get_args, get_origin, overload
from urllib.parse import quote

import httpx2
from pydantic import TypeAdapter

from agentforge.client import routes
from agentforge.client.routes import Call, Page, PartInput
from agentforge.model.agent import AgentInfo
from agentforge.model.event_types import QuestionRequest, Todo
from agentforge.model.message import WithParts
from agentforge.model.part import Part
from agentforge.model.permission import PermissionReply, PermissionRequestInfo
from agentforge.model.provider import ConfigProviders, ProviderList
from agentforge.model.session import PermissionRule, Session

P = ParamSpec("P")
T = TypeVar("T")


class Sync:
    """Marks a namespace of the blocking client."""


class Async:
    """Marks a namespace of the asyncio client."""


M = TypeVar("M", Sync, Async)


class Namespace(Generic[M]):
    def __init__(self, execute: Callable[[Call[Any]], Any]) -> None:
        self._execute = execute


class Endpoint(Generic[P, T]):
    """One route: `build(...)` says what to send and how to read the answer."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self._build = build
        self._name = build.__name__
        self._qualname = build.__qualname__
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        # help() and tracebacks should say `Messages.list`, not the private builder's name.
        self._name = name
        self._qualname = f"{owner.__qualname__}.{name}"

    @overload
    def __get__(self, namespace: Namespace[Sync], owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(self, namespace: Namespace[Async], owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, namespace: Namespace[Any], owner: type[Any]) -> Callable[P, Any]:
        def run(*args: P.args, **kwargs: P.kwargs) -> Any:
            return namespace._execute(self._build(*args, **kwargs))

        functools.update_wrapper(run, self._build, assigned=("__module__", "__doc__"), updated=())
        run.__name__ = self._name
        run.__qualname__ = self._qualname
        run.__signature__ = _signature(self._build, awaitable=_is_async(namespace))  # type: ignore[attr-defined]
        return run


def _is_async(namespace: Namespace[Any]) -> bool:
    """Whether the namespace is `X[Async](...)` or a subclass of `X[Async]`: its mode, seen at run time."""
    alias = getattr(namespace, "__orig_class__", None)
    aliases = [alias] if alias is not None else []
    aliases += [base for cls in type(namespace).__mro__ for base in getattr(cls, "__orig_bases__", ())]
    return any(Async in get_args(alias) for alias in aliases)


def _signature(build: Callable[..., Any], *, awaitable: bool) -> inspect.Signature:
    """The builder's parameters, returning what the call reads (`Call[X]` → `X`, or `Awaitable[X]`)."""
    try:
        signature = inspect.signature(build, eval_str=True)
    except NameError:  # an annotation only a type checker can see: keep the text
        signature = inspect.signature(build)
    result: Any = signature.return_annotation
    if isinstance(result, str):
        read = result.removeprefix("Call[").removesuffix("]") if result.startswith("Call[") else result
        result = f"Awaitable[{read}]" if awaitable else read
    elif get_origin(result) is Call:
        (read,) = get_args(result)
        result = Awaitable[read] if awaitable else read  # type: ignore[valid-type]
    return signature.replace(return_annotation=result)


def _typed(kind: Any) -> Callable[[httpx2.Response], Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return lambda response: adapter.validate_python(response.json())


def _json(response: httpx2.Response) -> Any:
    return response.json()


def _body(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _session(session_id: str, *rest: str) -> str:
    return "/".join(["/session", quote(session_id, safe=""), *(quote(piece, safe="") for piece in rest)])


# Sessions


def _create_session(
    title: str | None = None, parent_id: str | None = None, permission: Sequence[PermissionRule] | None = None
) -> Call[Session]:
    """A new session; `parent_id` makes it a child, `permission` is its own rules, applied after the
    agents'."""
    return routes.create_session(title, parent_id, permission)


def _list_sessions(
    *,
    directory: str | None = None,
    roots: bool | None = None,
    start: int | None = None,
    search: str | None = None,
    limit: int | None = None,
) -> Call[list[Session]]:
    """Sessions, newest first: of `directory`, only roots, updated since `start` (ms), titles matching
    `search`."""
    return routes.list_sessions(directory, roots, start, search, limit)


def _update_session(
    session_id: str, *, title: str | None = None, permission: Sequence[PermissionRule] | None = None
) -> Call[Session]:
    """Rename a session or replace its permission rules."""
    return routes.update_session(session_id, title, permission)


def _children(session_id: str) -> Call[list[Session]]:
    """The sessions whose parent is this one (subtasks' sessions, ones created with `parent_id`)."""
    return Call("GET", _session(session_id, "children"), _typed(list[Session]))


def _fork(session_id: str, message_id: str | None = None) -> Call[Session]:
    """A new session with the history up to (not including) `message_id`, or all of it."""
    return Call("POST", _session(session_id, "fork"), _typed(Session), json=_body(messageID=message_id))


def _summarize(session_id: str, model: str, *, auto: bool = False) -> Call[bool]:
    """Compact the history with `model` ("provider/model"), then run the loop."""
    body = {**routes.parse_model(model), "auto": auto}
    return Call("POST", _session(session_id, "summarize"), _typed(bool), json=body, long_running=True)


def _todo(session_id: str) -> Call[list[Todo]]:
    """The session's todo list."""
    return Call("GET", _session(session_id, "todo"), _typed(list[Todo]))


def _diff(session_id: str, message_id: str | None = None) -> Call[list[dict[str, Any]]]:
    """The files the session's tools changed (only the turn answering `message_id`, when given), each
    from before its first change to now."""
    return Call("GET", _session(session_id, "diff"), _json, params=_body(messageID=message_id))


def _revert(session_id: str, message_id: str, part_id: str | None = None) -> Call[Session]:
    """Hide the messages from `message_id` (from `part_id` within it) on, and put back the files they
    changed."""
    body = _body(messageID=message_id, partID=part_id)
    return Call("POST", _session(session_id, "revert"), _typed(Session), json=body)


def _unrevert(session_id: str) -> Call[Session]:
    """Undo the revert: the hidden messages come back, and so do the files as they were before it."""
    return Call("POST", _session(session_id, "unrevert"), _typed(Session))


def _init(session_id: str, model: str, message_id: str | None = None) -> Call[bool]:
    """Have the agent write the workspace's AGENTS.md."""
    body = _body(**routes.parse_model(model), messageID=message_id)
    return Call("POST", _session(session_id, "init"), _typed(bool), json=body, long_running=True)


class Sessions(Namespace[M]):
    create = Endpoint(_create_session)
    list = Endpoint(_list_sessions)
    get = Endpoint(routes.get_session)
    update = Endpoint(_update_session)
    delete = Endpoint(routes.delete_session)
    status = Endpoint(routes.status)
    children = Endpoint(_children)
    abort = Endpoint(routes.abort)
    fork = Endpoint(_fork)
    summarize = Endpoint(_summarize)
    todo = Endpoint(_todo)
    diff = Endpoint(_diff)
    revert = Endpoint(_revert)
    unrevert = Endpoint(_unrevert)
    init = Endpoint(_init)


# Messages and parts


def _messages(session_id: str, *, limit: int | None = None, before: str | None = None) -> Call[Page]:
    """Messages with their parts, oldest first; with `limit`, only the newest `limit` of them (pass
    the page's `next_cursor` as `before` for the ones before)."""
    return routes.messages(session_id, limit, before)


def _prompt(
    session_id: str,
    parts: str | Sequence[PartInput],
    *,
    model: str | None = None,
    agent: str | None = None,
    system: str | None = None,
    no_reply: bool = False,
    message_id: str | None = None,
) -> Call[WithParts]:
    """Run one turn; the final assistant message (the user message with `no_reply`)."""
    body = routes.prompt_body(
        parts, model=model, agent=agent, system=system, no_reply=no_reply, message_id=message_id
    )
    return routes.prompt(session_id, body)


def _prompt_async(
    session_id: str,
    parts: str | Sequence[PartInput],
    *,
    model: str | None = None,
    agent: str | None = None,
    system: str | None = None,
    message_id: str | None = None,
) -> Call[None]:
    """Start a turn and return at once; follow it on `forge.events.subscribe(session_id)`."""
    body = routes.prompt_body(
        parts, model=model, agent=agent, system=system, no_reply=False, message_id=message_id
    )
    return routes.prompt_async(session_id, body)


def _delete_message(session_id: str, message_id: str) -> Call[bool]:
    """Delete a message and its parts."""
    return Call("DELETE", _session(session_id, "message", message_id), _typed(bool))


def _delete_part(session_id: str, message_id: str, part_id: str) -> Call[bool]:
    """Delete one part of a message."""
    return Call("DELETE", _session(session_id, "message", message_id, "part", part_id), _typed(bool))


def _update_part(session_id: str, message_id: str, part_id: str, part: Part | dict[str, Any]) -> Call[Part]:
    """Replace a part (its ids must match the ones given)."""
    body = part.wire() if not isinstance(part, dict) else part
    path = _session(session_id, "message", message_id, "part", part_id)
    return Call("PATCH", path, _typed(Part), json=body)


class Messages(Namespace[M]):
    # `forge.messages(session_id)`: the call form of `list`, as the SDK had it before namespaces.
    __call__ = Endpoint(_messages)
    list = Endpoint(_messages)
    get = Endpoint(routes.message)
    create = Endpoint(_prompt)
    create_async = Endpoint(_prompt_async)
    delete = Endpoint(_delete_message)
    delete_part = Endpoint(_delete_part)
    update_part = Endpoint(_update_part)


# Permissions and questions


def _pending_permissions() -> Call[list[PermissionRequestInfo]]:
    """Permission requests waiting for an answer."""
    return Call("GET", "/permission", _typed(list[PermissionRequestInfo]))


def _reply_permission(request_id: str, reply: PermissionReply, message: str | None = None) -> Call[bool]:
    """Answer a permission request: once, always (this pattern from now on) or reject (with a message
    the model is told)."""
    path = f"/permission/{quote(request_id, safe='')}/reply"
    return Call("POST", path, _typed(bool), json=_body(reply=reply, message=message))


class Permissions(Namespace[M]):
    list = Endpoint(_pending_permissions)
    reply = Endpoint(_reply_permission)


def _pending_questions() -> Call[list[QuestionRequest]]:
    """Questions waiting for an answer."""
    return Call("GET", "/question", _typed(list[QuestionRequest]))


def _reply_question(request_id: str, answers: Sequence[Sequence[str]]) -> Call[bool]:
    """One list of chosen labels (or typed text) per question, in order."""
    path = f"/question/{quote(request_id, safe='')}/reply"
    return Call("POST", path, _typed(bool), json={"answers": [list(answer) for answer in answers]})


def _reject_question(request_id: str) -> Call[bool]:
    """Dismiss a question (the turn stops)."""
    return Call("POST", f"/question/{quote(request_id, safe='')}/reject", _typed(bool))


class Questions(Namespace[M]):
    list = Endpoint(_pending_questions)
    reply = Endpoint(_reply_question)
    reject = Endpoint(_reject_question)


# Commands, agents, providers, audit


def _commands() -> Call[list[dict[str, Any]]]:
    """Commands available in the caller's workspace."""
    return Call("GET", "/command", _json)


def _run_command(
    session_id: str,
    command: str,
    arguments: str = "",
    *,
    agent: str | None = None,
    model: str | None = None,
    message_id: str | None = None,
) -> Call[WithParts]:
    """Run `/command arguments` as a turn; the final assistant message."""
    body = _body(command=command, arguments=arguments, agent=agent, model=model, messageID=message_id)
    return Call("POST", _session(session_id, "command"), _typed(WithParts), json=body, long_running=True)


def _shell(
    session_id: str, command: str, *, agent: str = "build", model: str | None = None
) -> Call[WithParts]:
    """Run a shell command in the session's workspace, recorded as a tool call."""
    body = _body(command=command, agent=agent, model=routes.parse_model(model) if model else None)
    return Call("POST", _session(session_id, "shell"), _typed(WithParts), json=body, long_running=True)


class Commands(Namespace[M]):
    list = Endpoint(_commands)
    run = Endpoint(_run_command)
    shell = Endpoint(_shell)


def _agents() -> Call[list[AgentInfo]]:
    """The agents: their mode, model and permissions."""
    return Call("GET", "/agent", _typed(list[AgentInfo]))


class Agents(Namespace[M]):
    list = Endpoint(_agents)


def _providers() -> Call[ProviderList]:
    """All known providers, the default model of each, and which are connected."""
    return Call("GET", "/provider", _typed(ProviderList))


def _connected_providers() -> Call[ConfigProviders]:
    """The connected providers with their models, and the default model of each."""
    return Call("GET", "/config/providers", _typed(ConfigProviders))


class Providers(Namespace[M]):
    list = Endpoint(_providers)
    connected = Endpoint(_connected_providers)


def _audit(*, after: int | None = None, limit: int | None = None) -> Call[dict[str, Any]]:
    """One page of the tenant's audit chain: `{entries, next}` (pass `next` as `after`)."""
    return Call("GET", "/audit", _json, params=_body(after=after, limit=limit))


class Audit(Namespace[M]):
    list = Endpoint(_audit)


# What opencode's clients read about the workspace


def _files(path: str = "") -> Call[list[dict[str, Any]]]:
    """The entries of a workspace directory: directories first (ending in "/"), then files."""
    return Call("GET", "/file", _json, params=_body(path=path or None))


def _read_file(path: str) -> Call[dict[str, Any]]:
    """A workspace file's content: text with its diff against git HEAD, or binary as base64."""
    return Call("GET", "/file/content", _json, params={"path": path})


def _file_status() -> Call[list[dict[str, Any]]]:
    """Files that differ from the git HEAD (untracked ones as added), with their line counts."""
    return Call("GET", "/file/status", _json)


def _find_text(pattern: str) -> Call[list[dict[str, Any]]]:
    """The first matching lines of `pattern` (ripgrep), paths relative to the workspace."""
    return Call("GET", "/find", _json, params={"pattern": pattern})


def _find_files(query: str, *, limit: int | None = None) -> Call[list[str]]:
    """Workspace paths matching `query`, best first; directories end in "/"."""
    return Call("GET", "/find/file", _json, params=_body(query=query, limit=limit))


class Files(Namespace[M]):
    list = Endpoint(_files)
    read = Endpoint(_read_file)
    status = Endpoint(_file_status)
    find_text = Endpoint(_find_text)
    find_files = Endpoint(_find_files)


def _config() -> Call[dict[str, Any]]:
    """The caller's effective config, without secrets."""
    return Call("GET", "/config", _json)


def _path() -> Call[dict[str, Any]]:
    """The caller's workspace and the directory it asked for."""
    return Call("GET", "/path", _json)


def _vcs() -> Call[dict[str, Any]]:
    """The workspace's git branch and default branch (empty outside a git checkout)."""
    return Call("GET", "/vcs", _json)


def _tool_ids() -> Call[list[str]]:
    """Every tool of the caller's tenant: built-ins, plugin tools and MCP servers' tools."""
    return Call("GET", "/experimental/tool/ids", _json)


def _mcp_status() -> Call[dict[str, Any]]:
    """Each configured MCP server of the caller's tenant: connected, disabled or failed (with why)."""
    return Call("GET", "/mcp", _json)


class Instance(Namespace[M]):
    health = Endpoint(routes.health)
    config = Endpoint(_config)
    path = Endpoint(_path)
    vcs = Endpoint(_vcs)
    tool_ids = Endpoint(_tool_ids)
    mcp = Endpoint(_mcp_status)
