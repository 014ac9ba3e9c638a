"""Live session status (KERNEL 3.6): kept in memory, published as session.status (+ session.idle)."""

from __future__ import annotations

from agentforge.bus import Bus
from agentforge.model.events import SESSION_IDLE, SESSION_STATUS, Event
from agentforge.model.session import StatusBusy, StatusIdle, StatusRetry
from agentforge.session.status import StatusTracker


def _tracker() -> tuple[StatusTracker, list[Event]]:
    bus = Bus()
    published: list[Event] = []
    bus.listen(published.append)
    return StatusTracker(bus), published


def test_busy_is_published_and_listed() -> None:
    tracker, published = _tracker()
    tracker.set("default", "ses_1", StatusBusy())
    assert [(e.type, e.properties) for e in published] == [
        (SESSION_STATUS, {"sessionID": "ses_1", "status": {"type": "busy"}})
    ]
    assert (published[0].session_id, published[0].tenant_id) == ("ses_1", "default")
    assert tracker.get("ses_1") == StatusBusy()
    assert tracker.busy_sessions("default") == {"ses_1": StatusBusy()}


def test_same_status_twice_is_published_once() -> None:
    tracker, published = _tracker()
    tracker.set("default", "ses_1", StatusBusy())
    tracker.set("default", "ses_1", StatusBusy())
    retry = StatusRetry(attempt=1, message="slow down", next=123)
    tracker.set("default", "ses_1", retry)
    tracker.set("default", "ses_1", StatusRetry(attempt=1, message="slow down", next=123))
    assert [e.properties["status"] for e in published] == [
        {"type": "busy"},
        {"type": "retry", "attempt": 1, "message": "slow down", "next": 123},
    ]
    # A different retry (next attempt) is a change.
    tracker.set("default", "ses_1", StatusRetry(attempt=2, message="slow down", next=456))
    assert len(published) == 3


def test_idle_publishes_status_then_idle_and_leaves_the_map() -> None:
    tracker, published = _tracker()
    tracker.set("default", "ses_1", StatusBusy())
    published.clear()
    tracker.set("default", "ses_1", StatusIdle())
    assert [(e.type, e.properties) for e in published] == [
        (SESSION_STATUS, {"sessionID": "ses_1", "status": {"type": "idle"}}),
        (SESSION_IDLE, {"sessionID": "ses_1"}),
    ]
    assert all(e.tenant_id == "default" and e.session_id == "ses_1" for e in published)
    assert tracker.busy_sessions("default") == {}
    assert tracker.get("ses_1") == StatusIdle()


def test_idle_for_an_idle_session_publishes_nothing() -> None:
    tracker, published = _tracker()
    tracker.set("default", "ses_never_busy", StatusIdle())
    tracker.set("default", "ses_1", StatusBusy())
    tracker.set("default", "ses_1", StatusIdle())
    tracker.set("default", "ses_1", StatusIdle())
    assert [e.type for e in published] == [SESSION_STATUS, SESSION_STATUS, SESSION_IDLE]


def test_tenants_see_only_their_own_sessions() -> None:
    tracker, published = _tracker()
    tracker.set("acme", "ses_a", StatusBusy())
    tracker.set("globex", "ses_b", StatusRetry(attempt=1, message="rate limited", next=1))
    assert tracker.busy_sessions("acme") == {"ses_a": StatusBusy()}
    assert list(tracker.busy_sessions("globex")) == ["ses_b"]
    assert tracker.busy_sessions("default") == {}
    assert [e.tenant_id for e in published] == ["acme", "globex"]

    tracker.set("acme", "ses_a", StatusIdle())
    assert tracker.busy_sessions("acme") == {}
    assert list(tracker.busy_sessions("globex")) == ["ses_b"]
