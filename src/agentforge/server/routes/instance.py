"""opencode's instance routes: `/path` (where things are), `/vcs` (the workspace's git state) and
`/log` (a client's log line, written to the server's log)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import Field

from agentforge.config import user_config_file
from agentforge.model.base import Wire
from agentforge.server.deps import IdentityDep, RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.server.workspace import WorkspaceDep
from agentforge.workspace.git import FileStatus, VcsFileDiff, VcsInfo
from agentforge.workspace.git_reader import git_view

router = APIRouter(tags=["instance"])

client_log = logging.getLogger("agentforge.client")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


class PathInfo(Wire):
    home: str
    state: str
    config: str
    worktree: str
    directory: str


class VcsFileStatus(Wire):
    file: str
    additions: int
    deletions: int
    status: Literal["added", "deleted", "modified"]


class LogInput(Wire):
    service: str = Field(max_length=200)
    level: Literal["debug", "info", "error", "warn"]
    message: str = Field(max_length=10_000)
    extra: dict[str, Any] | None = None


def _one_line(text: str) -> str:
    """A client's text as one log line: it cannot forge lines of the server's own."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


@router.get("/path", operation_id="path.get", responses={200: {"model": PathInfo}})
async def get_path(rt: RuntimeDep, tenant_id: TenantDep, access: WorkspaceDep) -> WireResponse:
    """The caller's workspace (`worktree`), the directory it asked for, and, for the local user only,
    the server's home, data and config directories: a confined tenant learns no server path, its
    home is its workspace (the HOME its tools' processes get)."""
    scope = await rt.scope(tenant_id)
    directory = str(access.base or access.root)
    if scope.confinement.boundary is not None:
        root = str(access.root)
        return WireResponse(PathInfo(home=root, state="", config="", worktree=root, directory=directory))
    return WireResponse(
        PathInfo(
            home=str(Path.home()),
            state=str(scope.settings.data_dir),
            config=str(user_config_file().parent),
            worktree=str(access.root),
            directory=directory,
        )
    )


@router.get("/vcs", operation_id="vcs.get", responses={200: {"model": VcsInfo}})
async def get_vcs(access: WorkspaceDep) -> WireResponse:
    """The workspace's git branch and default branch (empty when it is not a git checkout)."""
    return WireResponse(await (await git_view(access)).info())


async def git_status(access: WorkspaceDep) -> list[FileStatus]:
    return await (await git_view(access)).status()


@router.get("/vcs/status", operation_id="vcs.status", responses={200: {"model": list[VcsFileStatus]}})
async def get_vcs_status(access: WorkspaceDep) -> WireResponse:
    """Files that differ from the git HEAD, with their line counts."""
    found = await git_status(access)
    return WireResponse(
        [VcsFileStatus(file=f.path, additions=f.added, deletions=f.removed, status=f.status) for f in found]
    )


@router.get("/vcs/diff", operation_id="vcs.diff", responses={200: {"model": list[VcsFileDiff]}})
async def get_vcs_diff(
    access: WorkspaceDep,
    mode: Annotated[
        Literal["git", "branch"],
        Query(description="git: against HEAD; branch: against where HEAD left the default branch"),
    ] = "git",
) -> WireResponse:
    """The workspace's uncommitted (or, with `branch`, unmerged) changes as patches."""
    against: Literal["head", "branch"] = "branch" if mode == "branch" else "head"
    return WireResponse(await (await git_view(access)).diff(against))


@router.post("/log", operation_id="app.log", responses={200: {"model": bool}})
async def write_log(body: LogInput, caller: IdentityDep) -> WireResponse:
    """A client's log line, into the server's log (logger `agentforge.client`) with who sent it."""
    client_log.log(
        _LEVELS[body.level],
        "[%s/%s] %s: %s",
        caller.tenant,
        caller.user,
        _one_line(body.service),
        _one_line(body.message),
        extra={"client_extra": body.extra or {}},
    )
    return WireResponse(True)
