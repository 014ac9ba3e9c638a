"""Commands and user-run shell commands (KERNEL 1.1, 1.4): `GET /command`,
`POST /session/{id}/command`, `POST /session/{id}/shell`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agentforge.model.message import WithParts
from agentforge.server.deps import PromptDep, RuntimeDep, SessionsDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.session.channels.commands import CommandInput, CommandRunner, list_commands
from agentforge.session.channels.shell import ShellInput, run_shell

router = APIRouter(tags=["command"])

_WITH_PARTS: dict[int | str, dict[str, Any]] = {200: {"model": WithParts}}
_SHELL_OFF: dict[int | str, dict[str, Any]] = {
    403: {"description": "The caller's tenant may not run commands (server config tenancy.shell)"}
}


@router.get("/command", operation_id="command.list", summary="Commands available in the caller's workspace")
async def commands(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    scope = await rt.scope(tenant_id)
    found = await list_commands(scope.settings.config, scope.settings.directory)
    return WireResponse([command.wire() for command in found])


@router.post(
    "/session/{session_id}/command",
    operation_id="session.command",
    responses=_WITH_PARTS | _SHELL_OFF,
    summary="Expand a command's template and send it as a prompt",
)
async def run_command(session_id: str, body: CommandInput, prompts: PromptDep) -> WireResponse:
    return WireResponse(await CommandRunner(prompts).run(session_id, body))


@router.post(
    "/session/{session_id}/shell",
    operation_id="session.shell",
    responses=_WITH_PARTS | _SHELL_OFF,
    summary="Run a shell command as the user; 409 while the session is busy, 403 without the grant",
)
async def shell(session_id: str, body: ShellInput, sessions: SessionsDep) -> WireResponse:
    session = await sessions.get(session_id)
    return WireResponse(await run_shell(sessions.services, await sessions.scope(), session, body))
