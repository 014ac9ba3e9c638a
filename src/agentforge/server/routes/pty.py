"""Terminal routes (opencode's `/pty`): create, list, resize, remove, and connect over a WebSocket.

Every route first checks that the caller may run commands (`tenancy.shell`, always true for the local
user), then looks the terminal up among its own tenant's. The WebSocket cannot carry a header from a
browser, so it accepts either the usual credentials or a single-use ticket from
`POST /pty/{id}/connect-token`. Messages: the server sends the terminal's output as text frames, after
the output the client missed since its `cursor`, and a binary frame `\\x00{"cursor": N}` saying how
far the output it has now goes; the client sends what is typed as text.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request, WebSocket, WebSocketDisconnect
from pydantic import Field, field_validator

from agentforge.identity.authenticate import Authenticator
from agentforge.identity.errors import AuthFailure
from agentforge.identity.model import Identity
from agentforge.identity.request import RequestFacts
from agentforge.model.base import Wire
from agentforge.model.events import CURRENT_ACTOR
from agentforge.runtime.runtime import Runtime
from agentforge.runtime.scope import TenantScopeError
from agentforge.server.deps import IdentityDep, RuntimeDep, TenantDep
from agentforge.server.errors import ApiError
from agentforge.server.responses import WireResponse
from agentforge.server.workspace import WorkspaceDep
from agentforge.store.audit import digest
from agentforge.terminal.registry import TerminalNotFoundError, Terminals
from agentforge.terminal.terminal import Client, PtyInfo, Terminal
from agentforge.tools.builtin.bash import default_shell
from agentforge.tools.confinement import ShellNotAllowedError
from agentforge.tools.sandbox import SandboxRefusedError

router = APIRouter(prefix="/pty", tags=["pty"])
# The WebSocket authenticates by itself (headers or a ticket): it is mounted without the HTTP
# identity dependency.
socket_router = APIRouter(tags=["pty"])

PTY_CREATED_AUDIT = "pty.created"
PTY_REMOVED_AUDIT = "pty.removed"
# Shells a terminal may be asked to start by name (their `-l` login semantics are known).
KNOWN_SHELLS = ("bash", "zsh", "sh", "dash", "ksh", "fish")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
POLICY_VIOLATION = 1008


class TerminalSize(Wire):
    rows: int = Field(gt=0, le=1000)
    cols: int = Field(gt=0, le=1000)


class PtyCreateInput(Wire):
    command: str | None = Field(default=None, min_length=1)
    args: list[str] | None = None
    cwd: str | None = None
    title: str | None = Field(default=None, max_length=200)
    env: dict[str, str] | None = None

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        bad = sorted(name for name in value or {} if not _ENV_NAME.match(name))
        if bad:
            raise ValueError(f"not valid environment variable names: {', '.join(bad)}")
        return value


class PtyUpdateInput(Wire):
    title: str | None = Field(default=None, max_length=200)
    size: TerminalSize | None = None


class ConnectToken(Wire):
    ticket: str
    expires_in: int


class Shell(Wire):
    path: str
    name: str
    acceptable: bool


def terminals(request: Request) -> Terminals:
    found: Terminals = request.app.state.terminals
    return found


async def _may_run_commands(rt: Runtime, tenant_id: str) -> None:
    (await rt.scope(tenant_id)).confinement.check_shell()


_PTY: dict[int | str, dict[str, Any]] = {
    200: {"model": PtyInfo},
    403: {"description": "The caller's tenant may not run commands (server config tenancy.shell)"},
}


@router.get("/shells", operation_id="pty.shells", responses={200: {"model": list[Shell]}})
async def shells(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    """The shells installed on the server that a terminal can start."""
    await _may_run_commands(rt, tenant_id)
    found = await asyncio.to_thread(_installed_shells)
    return WireResponse(found)


def _installed_shells() -> list[Shell]:
    paths: list[str] = []
    with contextlib.suppress(OSError), open("/etc/shells") as listed:
        paths = [line.strip() for line in listed if line.startswith("/")]
    for name in KNOWN_SHELLS:
        which = shutil.which(name)
        if which is not None:
            paths.append(which)
    unique = [p for p in dict.fromkeys(os.path.realpath(p) for p in paths) if os.access(p, os.X_OK)]
    return [Shell(path=p, name=Path(p).name, acceptable=Path(p).name in KNOWN_SHELLS) for p in unique]


@router.get("", operation_id="pty.list", responses={200: {"model": list[PtyInfo]}})
async def list_terminals(request: Request, rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    await _may_run_commands(rt, tenant_id)
    return WireResponse(terminals(request).list(tenant_id))


@router.post("", operation_id="pty.create", responses=_PTY)
async def create_terminal(
    request: Request,
    rt: RuntimeDep,
    caller: IdentityDep,
    access: WorkspaceDep,
    body: PtyCreateInput | None = None,
) -> WireResponse:
    """A shell (or `command`) on a new terminal in the workspace (or `cwd` inside it)."""
    body = body or PtyCreateInput()
    tenant_id = caller.tenant
    scope = await rt.scope(tenant_id)
    scope.confinement.check_shell()
    cwd = await asyncio.to_thread(access.resolve, body.cwd or ".")
    if not await asyncio.to_thread(cwd.is_dir):
        raise ApiError(400, "BadRequestError", f"cwd: {body.cwd!r} is not a directory in the workspace")
    command = body.command or default_shell()
    args = body.args if body.args is not None else (["-l"] if Path(command).name in KNOWN_SHELLS else [])
    env = scope.confinement.env.build(body.env)
    env["TERM"] = "xterm-256color"  # a real terminal, unlike the captured output of tools
    # A person at a terminal: the network as far as the tenant may have it at all (sandbox.network).
    sandbox = scope.confinement.sandbox.command(network=True)
    try:
        terminal = await terminals(request).create(
            tenant_id, argv=[command, *args], cwd=cwd, env=env, sandbox=sandbox, title=body.title
        )
    except SandboxRefusedError as exc:
        raise ApiError(403, "ForbiddenError", f"Terminals are disabled here: {exc}") from exc
    await rt.store.record_audit(
        tenant_id,
        PTY_CREATED_AUDIT,
        actor=caller.user,
        data={"ptyID": terminal.id, "command": command, "argsSha256": digest(args), "cwd": str(cwd)},
    )
    return WireResponse(terminal.info())


async def _own(request: Request, rt: Runtime, tenant_id: str, pty_id: str) -> Terminal:
    await _may_run_commands(rt, tenant_id)
    return terminals(request).get(tenant_id, pty_id)


@router.get("/{pty_id}", operation_id="pty.get", responses=_PTY)
async def get_terminal(pty_id: str, request: Request, rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    return WireResponse((await _own(request, rt, tenant_id, pty_id)).info())


@router.put("/{pty_id}", operation_id="pty.update", responses=_PTY)
async def update_terminal(
    pty_id: str, body: PtyUpdateInput, request: Request, rt: RuntimeDep, tenant_id: TenantDep
) -> WireResponse:
    """Rename the terminal, or tell it its new size."""
    terminal = await _own(request, rt, tenant_id, pty_id)
    if body.title is not None:
        terminal.title = body.title
    if body.size is not None:
        terminal.resize(body.size.rows, body.size.cols)
    terminals(request).updated(tenant_id, terminal)
    return WireResponse(terminal.info())


@router.delete("/{pty_id}", operation_id="pty.remove", responses={200: {"model": bool}})
async def remove_terminal(pty_id: str, request: Request, rt: RuntimeDep, caller: IdentityDep) -> WireResponse:
    """End the terminal's processes and forget it."""
    await _own(request, rt, caller.tenant, pty_id)
    await terminals(request).remove(caller.tenant, pty_id)
    await rt.store.record_audit(caller.tenant, PTY_REMOVED_AUDIT, actor=caller.user, data={"ptyID": pty_id})
    return WireResponse(True)


@router.post(
    "/{pty_id}/connect-token", operation_id="pty.connectToken", responses={200: {"model": ConnectToken}}
)
async def connect_token(pty_id: str, request: Request, rt: RuntimeDep, caller: IdentityDep) -> WireResponse:
    """A single-use ticket for `?ticket=` on the WebSocket (browsers cannot send headers there)."""
    await _own(request, rt, caller.tenant, pty_id)
    ticket, seconds = terminals(request).issue_ticket(caller.tenant, caller.user, pty_id)
    return WireResponse(ConnectToken(ticket=ticket, expires_in=seconds))


# -- the WebSocket -------------------------------------------------------------------------------------


async def _socket_identity(websocket: WebSocket, pty_id: str, ticket: str | None) -> Identity | str:
    """Who opens the socket, or why they may not."""
    registry: Terminals = websocket.app.state.terminals
    if ticket is not None:
        held = registry.redeem(ticket, pty_id)
        if held is None:
            return "The ticket is unknown, used or expired; ask /pty/{id}/connect-token for a new one"
        return Identity(held.tenant_id, held.user)
    authenticator: Authenticator = websocket.app.state.authenticator
    raw_path = websocket.scope.get("raw_path")
    path = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else websocket.url.path
    query = websocket.scope.get("query_string", b"").decode("latin-1")
    peer = websocket.client.host if websocket.client is not None else None
    facts = RequestFacts.of("GET", path, query, websocket.headers.items(), peer)
    try:
        return await authenticator.authenticate(facts)
    except AuthFailure as failure:
        return failure.message


@socket_router.websocket("/pty/{pty_id}/connect")
async def connect(
    websocket: WebSocket,
    pty_id: str,
    cursor: Annotated[int, Query(ge=0)] = 0,
    ticket: str | None = None,
) -> None:
    caller = await _socket_identity(websocket, pty_id, ticket)
    if isinstance(caller, str):
        await websocket.close(POLICY_VIOLATION, caller)
        return
    CURRENT_ACTOR.set(caller.user)
    rt: Runtime = websocket.app.state.runtime
    try:
        await _may_run_commands(rt, caller.tenant)
        terminal = websocket.app.state.terminals.get(caller.tenant, pty_id)
    except (TerminalNotFoundError, ShellNotAllowedError, TenantScopeError) as exc:
        await websocket.close(POLICY_VIOLATION, str(exc)[:120])
        return
    await websocket.accept()
    missed, client = terminal.attach(cursor)
    try:
        if missed:
            await websocket.send_text(missed)
        await websocket.send_bytes(b"\x00" + orjson.dumps({"cursor": terminal.cursor}))
        await _relay(websocket, terminal, client)
    finally:
        terminal.detach(client)


async def _relay(websocket: WebSocket, terminal: Terminal, client: Client) -> None:
    async def output() -> None:
        while (text := await client.next()) is not None:
            await websocket.send_text(text)

    async def keys() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            data = message.get("bytes")
            terminal.write(text if text is not None else (data or b"").decode("utf-8", errors="replace"))

    sending = asyncio.create_task(output())
    reading = asyncio.create_task(keys())
    try:
        done, _ = await asyncio.wait({sending, reading}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sending, reading):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
            await asyncio.gather(sending, reading, return_exceptions=True)
    if sending in done:  # the terminal ended: say so cleanly
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close(1000)
