"""`GET /audit`: the caller's tenant audit chain, oldest first, for admins."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agentforge.server.deps import AdminDep, RuntimeDep
from agentforge.server.responses import WireResponse
from agentforge.store.audit import MAX_PAGE

router = APIRouter(tags=["audit"])

DEFAULT_LIMIT = 100


@router.get(
    "/audit", operation_id="audit.list", summary="The caller's tenant audit log (hash chain), oldest first"
)
async def audit_log(
    caller: AdminDep,
    rt: RuntimeDep,
    after: Annotated[int, Query(ge=0, description="Only entries with a greater seq.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many entries.")] = DEFAULT_LIMIT,
) -> WireResponse:
    """`{"entries": [...], "next": seq}`: pass `next` as `after` for the following page (null at the end)."""
    entries, next_after = await rt.store.audit_entries(caller.tenant, after=after, limit=limit)
    return WireResponse({"entries": [entry.wire() for entry in entries], "next": next_after})
