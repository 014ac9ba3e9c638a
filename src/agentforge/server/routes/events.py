"""`GET /event`: the live event stream of the caller's tenant (KERNEL 1.3), resumable (server/resume.py).

The caller's credential is checked again at every heartbeat: a stream ends once its API key is
revoked or its token expires, instead of living as long as the connection does.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from agentforge.identity.authenticate import Authenticator
from agentforge.identity.model import Identity
from agentforge.model.events import Event
from agentforge.server.deps import IdentityDep, RuntimeDep, TenantDep
from agentforge.server.resume import Resume, parse_cursor
from agentforge.server.sse import SSE_HEADERS, Authorized, event_stream, frame, position_frame

router = APIRouter(tags=["events"])

HEARTBEAT_SECONDS = 10.0  # the default of `app.state.sse_heartbeat_seconds`

log = logging.getLogger(__name__)


@router.get(
    "/event",
    operation_id="event.subscribe",
    summary="Server-Sent Events of this tenant (optionally one session), resumable",
    description=(
        "Durable events carry an SSE `id:`: the session's `seq` with `sessionID`, the tenant's "
        "`position` without. Resume with `Last-Event-ID` (or `after`): everything after that point "
        "is replayed, then live events follow, with no gap and no duplicate. A point the log no "
        "longer holds, or one ahead of it, gets a `stream.reset` event `{position, reason}` "
        "instead: refetch state and continue from `position`. Parts streaming at connect time "
        "arrive first as `message.part.updated` with their text so far. When the server shuts down, "
        "every stream ends with `server.shutdown`: reconnect and resume."
    ),
)
async def events(
    request: Request,
    rt: RuntimeDep,
    caller: IdentityDep,
    tenant_id: TenantDep,
    session_id: Annotated[str | None, Query(alias="sessionID")] = None,
    after: Annotated[
        str | None, Query(description="resume after this event id (session seq, or tenant position)")
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    cursor = parse_cursor(after, last_event_id)

    def accept(event: Event) -> bool:
        return event.tenant_id == tenant_id and (session_id is None or event.session_id == session_id)

    # Taken together, with no await between: the subscription gets exactly what follows `cut`, and
    # the in-flight parts are as the deltas before it left them.
    subscription = rt.bus.subscribe(accept, buffer=request.app.state.sse_buffer)
    cut = rt.bus.published_position(tenant_id)
    inflight = rt.bus.inflight.snapshot(accept)
    try:
        if cut is None:  # nothing published since start-up: the log's end (live repeats are skipped)
            cut = (await rt.store.log_span(tenant_id, None))[1]
    except BaseException:
        subscription.close()
        raise
    resume = Resume(rt.store, tenant_id, session_id, cursor, cut, inflight)
    heartbeat: float = request.app.state.sse_heartbeat_seconds
    authenticator: Authenticator = request.app.state.authenticator
    stream = event_stream(
        subscription,
        heartbeat_seconds=heartbeat,
        replay=resume.events(),
        replayed_through=cut,
        still_authorized=still_authorized(authenticator, caller),
        encode=frame if session_id is not None else position_frame,
    )
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


def still_authorized(authenticator: Authenticator, caller: Identity) -> Authorized:
    async def check() -> bool:
        try:
            return await authenticator.still_valid(caller)
        except Exception:
            # The key could not be read again (store down): end the stream rather than serve
            # unchecked; the client's reconnect is authenticated from scratch.
            log.exception("could not re-check the credential of an event stream")
            return False

    return check
