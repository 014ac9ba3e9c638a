"""The SDK's resource namespaces and typed events, against the real app in-process."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from agentforge.client import (
    AgentForge,
    AgentForgeError,
    AsyncAgentForge,
    AuthenticationError,
    BadRequestError,
    BlockingASGITransport,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RequestTooLargeError,
)
from agentforge.client.errors import error_from_response
from agentforge.config import Settings
from agentforge.model.agent import AgentInfo
from agentforge.model.event_types import (
    EventMessagePartDelta,
    EventPermissionAsked,
    EventQuestionAsked,
    EventServerConnected,
    EventSessionIdle,
    EventSessionUpdated,
    TypedEvent,
)
from agentforge.model.message import AssistantMessage
from agentforge.model.part import TextPart
from agentforge.model.provider import ConfigProviders, ProviderList
from agentforge.model.session import PermissionRule
from tests.client.conftest import BASE_URL
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

QUESTIONS = [
    {
        "question": "Which colour?",
        "header": "Colour",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cold"}],
    }
]


def _text(message: Any) -> str:
    return "".join(part.text for part in message.parts if isinstance(part, TextPart))


async def test_stream_yields_typed_events_and_ends_with_the_final_message(
    forge: AsyncAgentForge, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(reply("Typed hello"))
    session = await forge.sessions.create(title="typed")
    turn = forge.sessions.stream(session.id, "hi")
    seen: list[TypedEvent] = [event async for event in turn]
    assert isinstance(seen[0], EventServerConnected)
    assert isinstance(seen[-1], EventSessionIdle) and seen[-1].properties.session_id == session.id
    assert "".join(e.properties.delta for e in seen if isinstance(e, EventMessagePartDelta)) == "Typed hello"
    assert turn.message is not None and isinstance(turn.message.info, AssistantMessage)
    assert _text(turn.message) == "Typed hello"


async def test_a_permission_and_a_question_answered_through_the_sdk(
    forge: AsyncAgentForge, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    (settings.directory / "notes.txt").write_text("secret plans\n")
    fake_openai.enqueue(
        call("read", {"filePath": str(settings.directory / "notes.txt")}),
        call("question", {"questions": QUESTIONS}),
        reply("Read it, and blue it is."),
    )
    rules = [PermissionRule(permission="read", pattern="*", action="ask")]
    session = await forge.sessions.create(title="humans", permission=rules)
    turn = forge.sessions.stream(session.id, "read my notes")
    async for event in turn:
        if isinstance(event, EventPermissionAsked):
            pending = await forge.permissions.list()
            assert [request.id for request in pending] == [event.properties.id]
            assert await forge.permissions.reply(event.properties.id, "once") is True
        elif isinstance(event, EventQuestionAsked):
            (listed,) = await forge.questions.list()
            assert listed.questions[0].question == "Which colour?"
            assert await forge.questions.reply(listed.id, [["Blue"]]) is True
    assert turn.message is not None and _text(turn.message) == "Read it, and blue it is."
    with pytest.raises(NotFoundError):
        await forge.questions.reject("que_gone")


async def test_typed_stream_resumes_with_last_event_id_after_a_drop(forge: AsyncAgentForge) -> None:
    session = await forge.sessions.create(title="before")
    async with forge.events.subscribe(session.id) as stream:
        events = aiter(stream)
        assert isinstance(await anext(events), EventServerConnected)
        await forge.sessions.update(session.id, title="one")
        first = await anext(events)
        assert isinstance(first, EventSessionUpdated) and first.properties.info.title == "one"
        resume_from = stream.last_event_id
        assert resume_from is not None
        # The connection drops; meanwhile the session changes again.
        raw = stream._raw
        assert raw is not None and raw._response is not None
        await raw._response.aclose()
        await forge.sessions.update(session.id, title="two")
        after: list[TypedEvent] = []
        while not any(isinstance(e, EventSessionUpdated) and e.properties.info.title == "two" for e in after):
            after.append(await asyncio.wait_for(anext(events), 10))
        assert stream._raw is not raw  # a new connection, which asked for what came after resume_from
        assert [type(e) for e in after] == [EventServerConnected, EventSessionUpdated]
        assert int(stream.last_event_id or 0) > int(resume_from)


async def test_session_namespace_covers_its_routes(forge: AsyncAgentForge, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("first answer"))
    session = await forge.sessions.create(title="ns")
    assert (await forge.sessions.get(session.id)).title == "ns"
    assert [s.id for s in await forge.sessions.list(search="ns")] == [session.id]
    answer = await forge.messages.create(session.id, "hello")
    page = await forge.messages.list(session.id)
    assert [m.info.id for m in page.items][-1] == answer.info.id
    assert (await forge.messages.get(session.id, answer.info.id)).info.id == answer.info.id
    user_message = page.items[0].info.id
    fork = await forge.sessions.fork(session.id, answer.info.id)
    assert [m.info.id for m in (await forge.messages(fork.id)).items] != []
    assert await forge.sessions.children(session.id) == []
    assert await forge.sessions.todo(session.id) == []
    assert await forge.sessions.status() == {}
    assert await forge.sessions.abort(session.id) is True
    text_part = next(p for p in answer.parts if isinstance(p, TextPart))
    edited = await forge.messages.update_part(
        session.id, answer.info.id, text_part.id, {**text_part.wire(), "text": "edited"}
    )
    assert isinstance(edited, TextPart) and edited.text == "edited"
    assert await forge.messages.delete_part(session.id, answer.info.id, text_part.id) is True
    assert await forge.messages.delete(session.id, answer.info.id) is True
    assert [m.info.id for m in (await forge.messages.list(session.id)).items] == [user_message]
    assert await forge.sessions.delete(fork.id) is True
    with pytest.raises(NotFoundError):
        await forge.sessions.get(fork.id)


async def test_the_other_namespaces_read_the_server(forge: AsyncAgentForge) -> None:
    agents = await forge.agents.list()
    assert all(isinstance(agent, AgentInfo) for agent in agents)
    assert {agent.name for agent in agents} >= {"build", "plan"}
    plan = next(agent for agent in agents if agent.name == "plan")
    assert plan.mode == "primary" and plan.permission  # typed all the way down
    providers = await forge.providers.list()
    assert isinstance(providers, ProviderList) and "fake" in providers.connected
    connected = await forge.providers.connected()
    assert isinstance(connected, ConfigProviders)
    assert [provider.id for provider in connected.providers] == ["fake"]
    assert connected.providers[0].models[providers.default["fake"]].limit.context > 0
    assert isinstance((await forge.commands.list()), list)
    page = await forge.audit.list(limit=5)
    assert set(page) == {"entries", "next"}
    assert (await forge.instance.health())["healthy"] is True
    assert "directory" in await forge.instance.path()
    assert isinstance(await forge.instance.tool_ids(), list)
    assert isinstance(await forge.files.list(), list)
    assert await forge.permissions.list() == [] and await forge.questions.list() == []


async def test_errors_come_as_classes_by_kind(forge: AsyncAgentForge, fake_openai: FakeOpenAI) -> None:
    with pytest.raises(NotFoundError) as missing:
        await forge.sessions.get("ses_missing")
    assert (missing.value.status, missing.value.name) == (404, "NotFoundError")
    with pytest.raises(BadRequestError):
        await forge.messages.list("ses_missing", limit=-1)
    gate = asyncio.Event()
    fake_openai.enqueue(Script().pause(gate).text("late"))
    session = await forge.sessions.create()
    await forge.messages.create_async(session.id, "wait")
    deadline = asyncio.get_running_loop().time() + 10
    while not await forge.sessions.status():  # polled with a deadline: busy once the turn runs
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    user_message = (await forge.messages.list(session.id)).items[0]
    with pytest.raises(ConflictError) as busy:
        await forge.messages.delete(session.id, user_message.info.id)
    assert busy.value.data["sessionID"] == session.id
    gate.set()
    await forge.sessions.abort(session.id)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (413, RequestTooLargeError),
        (503, InternalServerError),
        (418, AgentForgeError),
    ],
)
def test_each_status_maps_to_its_error_class(status: int, kind: type[AgentForgeError]) -> None:
    response = httpx2.Response(status, json={"name": "SomeError", "data": {"message": "why"}})
    error = error_from_response(response)
    assert type(error) is kind and (error.status, error.name, error.message) == (status, "SomeError", "why")


async def test_the_sync_client_has_the_same_namespaces(app: FastAPI, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("sync typed"))

    def scenario() -> tuple[list[str], str]:
        with AgentForge(BASE_URL, transport=BlockingASGITransport(app)) as forge:
            session = forge.sessions.create(title="sync")
            turn = forge.sessions.stream(session.id, "hi")
            kinds: list[str] = [event.type for event in turn]
            with pytest.raises(NotFoundError):
                forge.sessions.get("ses_missing")
            assert turn.message is not None
            return kinds, _text(turn.message)

    kinds, text = await asyncio.wait_for(asyncio.to_thread(scenario), 30)
    assert kinds[0] == "server.connected" and kinds[-1] == "session.idle"
    assert text == "sync typed"
