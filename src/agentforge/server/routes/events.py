"""`GET /event`: the live event stream of the caller's tenant (KERNEL 1.3), resumable by seq.

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
from agentforge.server.sse import SSE_HEADERS, Authorized, Replay, event_stream
from agentforge.session.errors import InvalidInputError

router = APIRouter(tags=["events"])

HEARTBEAT_SECONDS = 10.0  # the default of `app.state.sse_heartbeat_seconds`

log = logging.getLogger(__name__)


@router.get(
    "/event",
    operation_id="event.subscribe",
    summary="Server-Sent Events of this tenant (optionally one session)",
)
async def events(
    request: Request,
    rt: RuntimeDep,
    caller: IdentityDep,
    tenant_id: TenantDep,
    session_id: Annotated[str | None, Query(alias="sessionID")] = None,
    after: Annotated[int | None, Query(ge=0, description="resume after this session seq")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    resume_from = after if after is not None else _parse_last_event_id(last_event_id)
    if resume_from is not None and session_id is None:
        raise InvalidInputError("resuming (Last-Event-ID or after) needs sessionID: seq is per session")

    def accept(event: Event) -> bool:
        return event.tenant_id == tenant_id and (session_id is None or event.session_id == session_id)

    subscription = rt.bus.subscribe(accept)
    replay: Replay | None = None
    if resume_from is not None and session_id is not None:
        sid, since = session_id, resume_from

        async def replay_missed() -> list[Event]:
            return await rt.store.events_after(tenant_id, sid, since)

        replay = replay_missed
    heartbeat: float = request.app.state.sse_heartbeat_seconds
    authenticator: Authenticator = request.app.state.authenticator
    stream = event_stream(
        subscription,
        heartbeat_seconds=heartbeat,
        replay=replay,
        still_authorized=still_authorized(authenticator, caller),
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


def _parse_last_event_id(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise InvalidInputError(f"Last-Event-ID must be a session seq number, got {value!r}") from exc
