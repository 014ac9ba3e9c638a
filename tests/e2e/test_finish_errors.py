"""Replies cut short by the provider are stored as named errors (KERNEL 3.3) and end the turn."""

from __future__ import annotations

import pytest

from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script, reply


@pytest.mark.parametrize(
    ("reason", "name"),
    [("length", "MessageOutputLengthError"), ("content_filter", "ContentFilterError")],
)
async def test_cut_short_reply_stores_a_named_error_and_frees_the_session(
    live: LiveServer, reason: str, name: str
) -> None:
    session = await live.create_session()
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session['id']}")
    live.fake.enqueue(Script().text("A partial answer that").finish(reason))
    result = (await live.prompt(session["id"], "write a long essay")).json()
    assert result["info"]["error"]["name"] == name
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["A partial answer that"]
    error = await events.wait_for(lambda f: f.type == "session.error")
    assert error.properties["error"]["name"] == name
    await events.wait_for(lambda f: f.type == "session.idle")
    await events.stop()
    assert len(live.fake.requests) == 1, "the turn ends instead of asking the model again"
    assert (await live.client.get("/session/status")).json() == {}
    live.fake.enqueue(reply("Shorter this time."))
    assert (await live.prompt(session["id"], "shorter please")).status_code == 200
