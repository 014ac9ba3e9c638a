"""File routes (opencode's `/file`): list a directory, read a file, and the git status of the
workspace. Every path stays inside the caller's workspace (server/workspace.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agentforge.server.responses import WireResponse
from agentforge.server.routes.instance import git_status
from agentforge.server.workspace import WorkspaceDep
from agentforge.workspace.files import FileContent, FileNode, list_directory, read_file
from agentforge.workspace.git import FileStatus

router = APIRouter(prefix="/file", tags=["file"])

PathQuery = Annotated[str, Query(description="Relative to the workspace root (or to `directory`)")]


@router.get("", operation_id="file.list", responses={200: {"model": list[FileNode]}})
async def list_files(access: WorkspaceDep, path: PathQuery = "") -> WireResponse:
    """The entries of a directory: directories first (their path ends in "/"), then files."""
    return WireResponse(await list_directory(access, path))


@router.get("/content", operation_id="file.read", responses={200: {"model": FileContent}})
async def file_content(access: WorkspaceDep, path: PathQuery) -> WireResponse:
    """A file's content: text with its diff against git HEAD, or binary as base64."""
    return WireResponse(await read_file(access, path))


@router.get("/status", operation_id="file.status", responses={200: {"model": list[FileStatus]}})
async def file_status(access: WorkspaceDep) -> WireResponse:
    """Files that differ from the git HEAD (untracked ones as added), with their line counts."""
    return WireResponse(await git_status(access))
