"""Real model objects and the durable events that carry them, for store tests."""

from __future__ import annotations

import time

from agentforge.model import events as ev
from agentforge.model import ids
from agentforge.model.events import DEFAULT_TENANT, Event
from agentforge.model.message import AssistantMessage, AssistantPath, AssistantTime, UserMessage, UserTime
from agentforge.model.part import CacheTokens, ModelRef, Part, StepFinishPart, TextPart, Tokens
from agentforge.model.session import Session, SessionTime


def now_ms() -> int:
    return int(time.time() * 1000)


def new_session(
    *,
    directory: str = "/work/project",
    title: str = "New session",
    parent_id: str | None = None,
    updated: int | None = None,
) -> Session:
    created = now_ms()
    return Session(
        id=ids.descending("ses"),
        slug="brave-otter",
        directory=directory,
        parent_id=parent_id,
        title=title,
        version="0.1.0",
        time=SessionTime(created=created, updated=updated if updated is not None else created),
    )


def user_message(session_id: str, *, created: int | None = None) -> UserMessage:
    return UserMessage(
        id=ids.ascending("msg"),
        session_id=session_id,
        time=UserTime(created=created if created is not None else now_ms()),
        agent="build",
        model=ModelRef(provider_id="openai", model_id="gpt-test"),
    )


def assistant_message(session_id: str, parent_id: str) -> AssistantMessage:
    return AssistantMessage(
        id=ids.ascending("msg"),
        session_id=session_id,
        time=AssistantTime(created=now_ms()),
        parent_id=parent_id,
        model_id="gpt-test",
        provider_id="openai",
        mode="build",
        agent="build",
        path=AssistantPath(cwd="/work/project", root="/work/project"),
    )


def text_part(message: UserMessage | AssistantMessage, text: str, *, part_id: str | None = None) -> TextPart:
    return TextPart(
        id=part_id or ids.ascending("prt"),
        session_id=message.session_id,
        message_id=message.id,
        text=text,
    )


def step_finish(
    message: UserMessage | AssistantMessage,
    *,
    cost: float,
    input: int = 0,
    output: int = 0,
    reasoning: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    part_id: str | None = None,
) -> StepFinishPart:
    return StepFinishPart(
        id=part_id or ids.ascending("prt"),
        session_id=message.session_id,
        message_id=message.id,
        reason="stop",
        cost=cost,
        tokens=Tokens(
            input=input,
            output=output,
            reasoning=reasoning,
            cache=CacheTokens(read=cache_read, write=cache_write),
        ),
    )


def session_created(session: Session, tenant_id: str = DEFAULT_TENANT) -> Event:
    props = {"sessionID": session.id, "info": session.wire()}
    return Event(ev.SESSION_CREATED, props, session_id=session.id, tenant_id=tenant_id)


def session_updated(session: Session, tenant_id: str = DEFAULT_TENANT) -> Event:
    props = {"sessionID": session.id, "info": session.wire()}
    return Event(ev.SESSION_UPDATED, props, session_id=session.id, tenant_id=tenant_id)


def session_deleted(session: Session, tenant_id: str = DEFAULT_TENANT) -> Event:
    props = {"sessionID": session.id, "info": session.wire()}
    return Event(ev.SESSION_DELETED, props, session_id=session.id, tenant_id=tenant_id)


def message_updated(message: UserMessage | AssistantMessage, tenant_id: str = DEFAULT_TENANT) -> Event:
    props = {"sessionID": message.session_id, "info": message.wire()}
    return Event(ev.MESSAGE_UPDATED, props, session_id=message.session_id, tenant_id=tenant_id)


def message_removed(message: UserMessage | AssistantMessage) -> Event:
    props = {"sessionID": message.session_id, "messageID": message.id}
    return Event(ev.MESSAGE_REMOVED, props, session_id=message.session_id)


def part_updated(part: Part, tenant_id: str = DEFAULT_TENANT) -> Event:
    props = {"sessionID": part.session_id, "part": part.wire(), "time": now_ms()}
    return Event(ev.PART_UPDATED, props, session_id=part.session_id, tenant_id=tenant_id)


def part_removed(part: TextPart | StepFinishPart) -> Event:
    props = {"sessionID": part.session_id, "messageID": part.message_id, "partID": part.id}
    return Event(ev.PART_REMOVED, props, session_id=part.session_id)
