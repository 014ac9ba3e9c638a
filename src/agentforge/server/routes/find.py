"""Search routes (opencode's `/find`): text with ripgrep, paths by a fuzzy query, and symbols (none:
no language server runs here). Searches stay inside the caller's workspace."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from agentforge.server.responses import WireResponse
from agentforge.server.workspace import WorkspaceDep
from agentforge.workspace.search import find_text, fuzzy_filter, list_paths

router = APIRouter(prefix="/find", tags=["find"])


@router.get("", operation_id="find.text")
async def find_in_files(
    access: WorkspaceDep,
    pattern: Annotated[str, Query(min_length=1, description="A regular expression (ripgrep syntax)")],
) -> WireResponse:
    """The first ten matching lines, as ripgrep reports them (paths relative to the workspace)."""
    return WireResponse(await find_text(access, pattern))


@router.get("/file", operation_id="find.files", responses={200: {"model": list[str]}})
async def find_files(
    access: WorkspaceDep,
    query: Annotated[str, Query(description="Characters the path contains, in order")],
    dirs: Annotated[Literal["true", "false"], Query(description="Include directories")] = "true",
    type: Annotated[Literal["file", "directory"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 10,
) -> WireResponse:
    """Workspace paths matching `query`, best first; directories end in "/"."""
    kind: Literal["file", "directory"] | None = type
    if kind is None and dirs == "false":
        kind = "file"
    paths = await list_paths(access)
    matched = await asyncio.to_thread(fuzzy_filter, paths, query.strip(), kind=kind, limit=limit)
    return WireResponse(matched)


@router.get("/symbol", operation_id="find.symbols")
async def find_symbols(query: Annotated[str, Query()] = "") -> WireResponse:
    """Workspace symbols come from language servers, which this server does not run: always empty."""
    return WireResponse([])
