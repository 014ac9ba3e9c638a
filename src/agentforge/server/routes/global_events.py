"""`GET /global/event`: opencode's instance-wide stream, which its terminal UI subscribes to.

It carries the caller's tenant-wide events (what `GET /event` carries) in opencode's global envelope,
`{directory, project, payload: {id, type, properties}}`, with `directory` the tenant's workspace. It
neither replays nor resumes: a client that reconnects reads the state again (opencode's clients do).
"""

from __future__ import annotations

import asyncio

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from agentforge.identity.authenticate import Authenticator
from agentforge.model.events import Event
from agentforge.server.deps import IdentityDep, RuntimeDep, TenantDep
from agentforge.server.routes.events import still_authorized
from agentforge.server.routes.project import project_id
from agentforge.server.sse import SSE_HEADERS, Encode, event_stream
from agentforge.session.workspace import workspace_access

router = APIRouter(tags=["global"])


def global_frame(directory: str, project: str) -> Encode:
    def encode(event: Event) -> bytes:
        data = orjson.dumps({"directory": directory, "project": project, "payload": event.envelope()})
        return b"data: %s\n\n" % data

    return encode


@router.get(
    "/global/event",
    operation_id="global.event",
    summary="Server-Sent Events of this tenant, in opencode's global envelope",
)
async def global_events(
    request: Request, rt: RuntimeDep, caller: IdentityDep, tenant_id: TenantDep
) -> StreamingResponse:
    scope = await rt.scope(tenant_id)
    access = await asyncio.to_thread(workspace_access, scope)
    subscription = rt.bus.subscribe(lambda event: event.tenant_id == tenant_id)
    authenticator: Authenticator = request.app.state.authenticator
    stream = event_stream(
        subscription,
        heartbeat_seconds=request.app.state.sse_heartbeat_seconds,
        still_authorized=still_authorized(authenticator, caller),
        encode=global_frame(str(access.root), project_id(tenant_id, access)),
    )
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)
