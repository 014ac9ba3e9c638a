"""The bus's view of streaming parts (bus/inflight.py) and the position it has published up to."""

from __future__ import annotations

from typing import Any

from agentforge.bus import Bus
from agentforge.bus.inflight import MAX_SNAPSHOT_CHARS
from agentforge.model import events as ev
from agentforge.model.events import Event


def _part(part_id: str, text: str = "", *, end: int | None = None, message: str = "msg_1") -> Event:
    span: dict[str, Any] = {"start": 1} if end is None else {"start": 1, "end": end}
    part = {
        "id": part_id,
        "type": "text",
        "text": text,
        "time": span,
        "sessionID": "ses_1",
        "messageID": message,
    }
    return Event(type=ev.PART_UPDATED, properties={"sessionID": "ses_1", "part": part}, session_id="ses_1")


def _writing(*message_ids: str, tenant: str = "default") -> list[Event]:
    """The processor's assistant messages, started and not completed: only their parts stream."""
    return [
        Event(
            type=ev.MESSAGE_UPDATED,
            properties={"info": {"id": m, "role": "assistant", "sessionID": "ses_1", "time": {"created": 1}}},
            session_id="ses_1",
            tenant_id=tenant,
        )
        for m in message_ids
    ]


def _delta(part_id: str, delta: str) -> Event:
    properties = {"sessionID": "ses_1", "partID": part_id, "field": "text", "delta": delta}
    return Event(type=ev.PART_DELTA, properties=properties, session_id="ses_1")


def _texts(bus: Bus) -> dict[str, str]:
    return {
        e.properties["part"]["id"]: e.properties["part"]["text"]
        for e in bus.inflight.snapshot(lambda _: True)
    }


def test_a_snapshot_holds_each_open_part_with_its_deltas_so_far() -> None:
    bus = Bus()
    bus.publish_many(_writing("msg_1"))
    bus.publish_many([_part("prt_a"), _delta("prt_a", "Hel"), _part("prt_b", "x"), _delta("prt_a", "lo")])

    assert _texts(bus) == {"prt_a": "Hello", "prt_b": "x"}
    (snapshot,) = bus.inflight.snapshot(lambda e: e.properties["part"]["id"] == "prt_a")
    assert snapshot.seq is None and snapshot.type == ev.PART_UPDATED


def test_ended_removed_and_completed_parts_leave_the_view() -> None:
    bus = Bus()
    bus.publish_many(_writing("msg_1", "msg_2"))
    bus.publish_many([_part("prt_a"), _part("prt_b"), _part("prt_c", message="msg_2"), _part("prt_d")])
    bus.publish(_part("prt_a", "done", end=2))
    bus.publish(Event(type=ev.PART_REMOVED, properties={"partID": "prt_b"}, session_id="ses_1"))
    info = {"id": "msg_2", "time": {"created": 1, "completed": 3}}
    bus.publish(Event(type=ev.MESSAGE_UPDATED, properties={"info": info}, session_id="ses_1"))
    bus.publish(_delta("prt_a", "late"))

    assert _texts(bus) == {"prt_d": ""}
    bus.publish(Event(type=ev.SESSION_DELETED, properties={}, session_id="ses_1"))
    assert len(bus.inflight) == 0


def test_a_users_text_part_is_not_streaming() -> None:
    bus = Bus()
    user_part = _part("prt_u", "hi")
    del user_part.properties["part"]["time"]
    bus.publish(user_part)
    assert len(bus.inflight) == 0


def test_a_part_claiming_a_start_streams_only_in_an_assistant_message_being_written() -> None:
    bus = Bus()
    user = {"id": "msg_u", "role": "user", "sessionID": "ses_1", "time": {"created": 1}}
    bus.publish(Event(type=ev.MESSAGE_UPDATED, properties={"info": user}, session_id="ses_1"))
    bus.publish_many(_writing("msg_a", tenant="t2"))
    # A user's message, one no one announced, and an assistant message of another tenant.
    bus.publish_many([_part("prt_u", "x", message="msg_u"), _part("prt_n", message="msg_none")])
    bus.publish_many([_part("prt_t", message="msg_a")])

    assert len(bus.inflight) == 0


def test_a_snapshot_stops_at_its_size_cap() -> None:
    bus = Bus()
    bus.publish_many(_writing("msg_1"))
    half = "x" * (MAX_SNAPSHOT_CHARS // 2 + 1)
    bus.publish_many([_part("prt_a"), _delta("prt_a", half), _part("prt_b", half), _part("prt_c", "y")])

    assert _texts(bus) == {"prt_a": half, "prt_c": "y"}
    assert len(bus.inflight) == 3


def test_the_published_position_follows_durable_events_per_tenant() -> None:
    bus = Bus()
    assert bus.published_position("default") is None
    bus.publish(Event(type=ev.SESSION_UPDATED, properties={}, session_id="ses_1", seq=4, position=9))
    bus.publish(_delta("prt_a", "x"))
    bus.publish(Event(type=ev.SESSION_UPDATED, properties={}, tenant_id="t2", seq=1, position=2))

    assert (bus.published_position("default"), bus.published_position("t2")) == (9, 2)
