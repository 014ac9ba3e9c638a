"""Title generation for new root sessions, through HTTP, with the title model on a second fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from agentforge.agents.registry import AgentRegistry
from agentforge.session.channels.title import TITLE_REQUEST, system_prompt, title_agent
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, reply

QUESTION = "What's the weather like in Paris this weekend?"


@pytest_asyncio.fixture
async def small_fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


def titled_config(main: FakeOpenAI, small: FakeOpenAI | None) -> dict[str, Any]:
    config = {**fake_provider_config(main), "title": True}
    if small is not None:
        config["small_model"] = "small/title-model"
        config["provider"] = {
            **config["provider"],
            "small": {
                "api": "openai",
                "options": {"baseURL": small.base_url, "apiKey": "sk-small"},
                "models": {"title-model": {"limit": {"context": 8000, "output": 512}}},
            },
        }
    return config


@pytest_asyncio.fixture
async def titled(
    tmp_path: Path, fake_openai: FakeOpenAI, small_fake: FakeOpenAI, database_url: str
) -> AsyncIterator[LiveServer]:
    config = titled_config(fake_openai, small_fake)
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server


async def _title_once_set(live: LiveServer, session_id: str, default: str) -> str:
    await live.background_settled()  # title generation runs beside the turn
    title: str = (await live.client.get(f"/session/{session_id}")).json()["title"]
    assert title != default, "the title was never set"
    return title


def _is_title_request(body: dict[str, Any]) -> bool:
    return any(
        message["role"] == "user" and TITLE_REQUEST in str(message["content"]) for message in body["messages"]
    )


async def test_first_message_of_a_new_session_gets_a_title(
    titled: LiveServer, small_fake: FakeOpenAI
) -> None:
    small_fake.enqueue(
        Script().text("<think>a weather question</think>\n\n  Paris weekend weather  \nmore").finish()
    )
    titled.fake.enqueue(reply("Sunny, 24 degrees."))
    session = await titled.create_session()
    assert session["title"].startswith("New session - ")

    response = await titled.prompt(session["id"], QUESTION)
    assert response.status_code == 200, response.text

    assert await _title_once_set(titled, session["id"], session["title"]) == "Paris weekend weather"
    [request] = small_fake.requests
    assert request["model"] == "title-model"
    assert "tools" not in request
    system = [m["content"] for m in request["messages"] if m["role"] == "system"]
    assert system == [system_prompt(title_agent(AgentRegistry(titled.settings.config)))]
    user = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert user == [TITLE_REQUEST + QUESTION]
    # The turn itself went to the session model, and the title wrote no message.
    assert len(titled.fake.requests) == 1 and not _is_title_request(titled.fake.requests[0])
    messages = (await titled.client.get(f"/session/{session['id']}/message")).json()
    assert [m["info"]["role"] for m in messages] == ["user", "assistant"]

    # The second message does not ask again.
    titled.fake.enqueue(reply("Rain on Sunday."))
    assert (await titled.prompt(session["id"], "And Sunday?")).status_code == 200
    await titled.background_settled()
    assert len(small_fake.requests) == 1
    assert (await titled.client.get(f"/session/{session['id']}")).json()["title"] == "Paris weekend weather"


async def test_chosen_titles_and_child_sessions_keep_theirs(
    titled: LiveServer, small_fake: FakeOpenAI
) -> None:
    small_fake.enqueue(reply("Should not be used"), reply("Should not be used"))
    named = await titled.create_session(title="My own title")
    child = await titled.create_session(parentID=named["id"])
    titled.fake.enqueue(reply("one"), reply("two"))

    assert (await titled.prompt(named["id"], QUESTION)).status_code == 200
    assert (await titled.prompt(child["id"], QUESTION)).status_code == 200
    await titled.background_settled()

    assert small_fake.requests == []
    assert (await titled.client.get(f"/session/{named['id']}")).json()["title"] == "My own title"
    assert (await titled.client.get(f"/session/{child['id']}")).json()["title"] == child["title"]
    assert child["title"].startswith("Child session - ")


async def test_title_failure_leaves_the_turn_and_the_title_alone(
    titled: LiveServer, small_fake: FakeOpenAI
) -> None:
    small_fake.enqueue(Script().error_status(400, {"error": {"message": "bad request", "type": "invalid"}}))
    titled.fake.enqueue(reply("Fine."))
    session = await titled.create_session()

    response = await titled.prompt(session["id"], QUESTION)
    assert response.status_code == 200
    assert response.json()["info"].get("error") is None
    await titled.background_settled()
    assert len(small_fake.requests) == 1
    assert (await titled.client.get(f"/session/{session['id']}")).json()["title"] == session["title"]


async def test_without_small_model_the_session_model_writes_the_title(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = titled_config(fake_openai, None)
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        # The title request and the turn race for the fake's scripts: both answer the same.
        fake_openai.enqueue(reply("Paris weather"), reply("Paris weather"))
        session = await live.create_session()
        assert (await live.prompt(session["id"], QUESTION)).status_code == 200
        assert await _title_once_set(live, session["id"], session["title"]) == "Paris weather"
        title_requests = [body for body in fake_openai.requests if _is_title_request(body)]
        assert len(title_requests) == 1 and title_requests[0]["model"] == "test-model"
        assert "tools" not in title_requests[0]


async def test_title_false_in_the_config_turns_it_off(live: LiveServer) -> None:
    live.fake.enqueue(reply("Hello."), reply("Should not be used"))
    session = await live.create_session()
    assert (await live.prompt(session["id"], QUESTION)).status_code == 200
    await live.background_settled()
    assert len(live.fake.requests) == 1
    assert (await live.client.get(f"/session/{session['id']}")).json()["title"] == session["title"]
