"""Tool contexts outside a session, for tests of tools and plugins.

A tool context needs a confinement and a permission seam: a session builds them from the caller's
tenant scope and the turn's rules. Outside a session, say which ones you mean: `unconfined()` (the
local user: the server's environment, no hard boundary, no fence, commands allowed) and an `ask`:
`allow_all`, or `refuse_outside`, which allows everything but paths outside the workspace.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentforge.model import ids
from agentforge.tools.base import (
    AskPermission,
    MetadataUpdate,
    OutsideWorkspaceError,
    PermissionRequest,
    ToolContext,
)
from agentforge.tools.confinement import Confinement, ProcessEnv
from agentforge.tools.fence import EXTERNAL_DIRECTORY, Fence
from agentforge.tools.sandbox import UNSANDBOXED, Sandbox
from agentforge.tools.services import NO_SERVICES, ToolServices


def unconfined(env: ProcessEnv | None = None, sandbox: Sandbox = UNSANDBOXED) -> Confinement:
    """The local user's confinement: `env` (the server's environment unless given), no boundary,
    an empty fence, commands allowed, run in `sandbox` (none unless given)."""
    return Confinement(
        env=env or ProcessEnv(inherit=True), boundary=None, fence=Fence(), sandbox=sandbox, shell_denied=None
    )


async def allow_all(request: PermissionRequest) -> None:
    """An `ask` that allows every request."""
    return None


async def refuse_outside(request: PermissionRequest) -> None:
    """An `ask` that allows every request but a path outside the workspace."""
    if request.permission == EXTERNAL_DIRECTORY:
        where = request.metadata.get("filepath") or ", ".join(request.patterns)
        raise OutsideWorkspaceError(f"Refusing to access {where}: it is outside the workspace.")


async def _ignore(_title: str | None, _metadata: dict[str, object]) -> None:
    return None


def tool_context(
    directory: Path,
    data_dir: Path,
    *,
    confinement: Confinement,
    ask: AskPermission,
    services: ToolServices = NO_SERVICES,
    metadata: MetadataUpdate | None = None,
    abort: asyncio.Event | None = None,
    agent: str = "build",
    session_id: str | None = None,
) -> ToolContext:
    """A context for one tool call in `directory`, with fresh ids."""
    return ToolContext(
        session_id=session_id or ids.descending("ses"),
        message_id=ids.ascending("msg"),
        call_id=f"call_{ids.ascending('prt')}",
        agent=agent,
        directory=directory,
        data_dir=data_dir,
        confinement=confinement,
        ask=ask,
        services=services,
        abort=abort or asyncio.Event(),
        metadata=metadata or _ignore,
    )
