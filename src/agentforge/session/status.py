"""Live session status (KERNEL 3.6): busy / retry / idle, kept in memory and published on change."""

from __future__ import annotations

from agentforge.bus import Bus
from agentforge.model.events import SESSION_IDLE, SESSION_STATUS, Event
from agentforge.model.session import StatusBusy, StatusIdle, StatusRetry

Status = StatusIdle | StatusBusy | StatusRetry


class StatusTracker:
    """Idle sessions are absent from the map, as `GET /session/status` expects."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._statuses: dict[str, tuple[str, Status]] = {}

    def get(self, session_id: str) -> Status:
        entry = self._statuses.get(session_id)
        return entry[1] if entry else StatusIdle()

    def busy_sessions(self, tenant_id: str) -> dict[str, Status]:
        return {sid: status for sid, (tenant, status) in self._statuses.items() if tenant == tenant_id}

    def set(self, tenant_id: str, session_id: str, status: Status) -> None:
        previous = self._statuses.get(session_id)
        if isinstance(status, StatusIdle):
            if previous is None:
                return
            del self._statuses[session_id]
        else:
            if previous is not None and previous[1] == status:
                return
            self._statuses[session_id] = (tenant_id, status)
        self._publish(tenant_id, session_id, status)

    def _publish(self, tenant_id: str, session_id: str, status: Status) -> None:
        self._bus.publish(
            Event(
                type=SESSION_STATUS,
                properties={"sessionID": session_id, "status": status.wire()},
                session_id=session_id,
                tenant_id=tenant_id,
            )
        )
        if isinstance(status, StatusIdle):
            self._bus.publish(
                Event(
                    type=SESSION_IDLE,
                    properties={"sessionID": session_id},
                    session_id=session_id,
                    tenant_id=tenant_id,
                )
            )
