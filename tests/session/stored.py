"""Write a built conversation straight into a store, as the loop's events would have (fast: submitted
in one go, awaited once)."""

from __future__ import annotations

from collections.abc import Iterable

from agentforge.model import events as ev
from agentforge.model.events import DEFAULT_TENANT, Event
from agentforge.model.message import WithParts
from agentforge.model.session import Session
from agentforge.store import Store
from tests.store.builders import now_ms, session_created


def conversation_events(messages: Iterable[WithParts], tenant_id: str = DEFAULT_TENANT) -> list[Event]:
    out: list[Event] = []
    for item in messages:
        sid = item.info.session_id
        out.append(
            Event(
                ev.MESSAGE_UPDATED,
                {"sessionID": sid, "info": item.info.wire()},
                session_id=sid,
                tenant_id=tenant_id,
            )
        )
        for part in item.parts:
            props = {"sessionID": sid, "part": part.wire(), "time": now_ms()}
            out.append(Event(ev.PART_UPDATED, props, session_id=sid, tenant_id=tenant_id))
    return out


async def store_conversation(store: Store, session: Session, messages: Iterable[WithParts]) -> None:
    await store.write(session_created(session))
    futures = [store.submit(event) for event in conversation_events(messages)]
    if futures:
        await futures[-1]  # the writer keeps order: the last one committed means all did
