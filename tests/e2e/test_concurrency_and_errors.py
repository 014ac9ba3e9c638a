"""One loop per session under concurrent prompts, and clear errors for bad input."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentforge.model.ids import ascending
from tests.e2e import held_prompts
from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script, call, reply


async def test_two_concurrent_prompts_share_one_loop(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("working on the first").pause(gate).finish("stop"), reply("both handled"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    first = asyncio.create_task(live.prompt(sid, "first question"))
    await events.wait_for(lambda f: f.type == "message.part.delta")
    second = asyncio.create_task(live.prompt(sid, "second question"))
    # The second message is stored while the first loop is still streaming.
    await events.wait_for(
        lambda f: (
            f.type == "message.updated"
            and f.properties["info"]["role"] == "user"
            and f.properties["info"]["id"] != events.of_type("message.updated")[0].properties["info"]["id"]
        )
    )
    assert live.fake.pending() == 1
    gate.set()
    results = [r.json() for r in await asyncio.gather(first, second)]
    await events.stop()

    assert results[0]["info"]["id"] == results[1]["info"]["id"], "both callers get the same final reply"
    assert [p["text"] for p in results[0]["parts"] if p["type"] == "text"] == ["both handled"]
    assert len(live.fake.requests) == 2, "one loop: two model calls in sequence, not two loops"
    last_user = [m for m in live.fake.requests[1]["messages"] if m["role"] == "user"][-1]
    content = (
        last_user["content"] if isinstance(last_user["content"], str) else last_user["content"][0]["text"]
    )
    assert "The user sent the following message:\nsecond question" in content


async def test_unknown_session_is_404(live: LiveServer) -> None:
    for method, path in [
        ("GET", "/session/ses_doesnotexist"),
        ("POST", "/session/ses_doesnotexist/abort"),
        ("GET", "/session/ses_doesnotexist/message"),
    ]:
        response = await live.client.request(method, path)
        assert response.status_code == 404
        assert response.json()["name"] == "NotFoundError"
        assert "ses_doesnotexist" in response.json()["data"]["message"]
    response = await live.prompt("ses_nope", "hi")
    assert response.status_code == 404


async def test_malformed_body_is_400_and_stores_nothing(live: LiveServer) -> None:
    session = await live.create_session()
    for body in [{"parts": []}, {"parts": [{"type": "text"}]}, {"parts": "hello"}, {}]:
        response = await live.client.post(f"/session/{session['id']}/message", json=body)
        assert response.status_code == 400, body
        assert response.json()["name"] == "ValidationError"
        assert response.json()["data"]["message"].startswith("Invalid request:")
    raw = await live.client.post(
        f"/session/{session['id']}/message",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert raw.status_code == 400
    assert (await live.client.get(f"/session/{session['id']}/message")).json() == []


async def test_unknown_model_is_400_with_suggestion_and_history_is_kept(live: LiveServer) -> None:
    session = await live.create_session()
    live.fake.enqueue(reply("first"))
    assert (await live.prompt(session["id"], "first")).status_code == 200
    response = await live.prompt(
        session["id"], "second", model={"providerID": "fake", "modelID": "test-modl"}
    )
    assert response.status_code == 400
    message = response.json()["data"]["message"]
    assert "Model not found: fake/test-modl" in message and "fake/test-model" in message
    history = (await live.client.get(f"/session/{session['id']}/message")).json()
    assert len(history) == 2


async def test_invalid_tool_arguments_go_back_to_the_model(live: LiveServer) -> None:
    session = await live.create_session()
    live.fake.enqueue(
        call("read", {"path": "wrong-field.txt"}),
        call("no_such_tool", {"x": 1}),
        reply("I will stop here."),
    )
    result = await live.prompt(session["id"], "read something")
    assert result.status_code == 200
    history = (await live.client.get(f"/session/{session['id']}/message")).json()
    tools = [p for m in history for p in m["parts"] if p["type"] == "tool"]
    assert tools[0]["state"]["status"] == "error"
    assert "The read tool was called with invalid arguments" in tools[0]["state"]["error"]
    assert tools[1]["tool"] == "invalid"
    assert "no_such_tool" in tools[1]["state"]["output"]
    second_request_tools = [m for m in live.fake.requests[1]["messages"] if m["role"] == "tool"]
    assert "invalid arguments" in second_request_tools[0]["content"]


@pytest.mark.parametrize("route", ["message", "prompt_async"])
@pytest.mark.parametrize("chosen_id", [False, True], ids=["server-id", "client-id"])
async def test_a_prompt_racing_its_sessions_delete_is_404_and_writes_nothing(
    held: LiveServer, route: str, chosen_id: bool
) -> None:
    sid = (await held.create_session())["id"]
    events = EventCollector()
    await events.start(held.client, "/event")
    hold = held_prompts.hold(sid)
    body: dict[str, Any] = {"parts": [{"type": "text", "text": "too late"}]}
    if chosen_id:
        body["messageID"] = ascending("msg")
    prompt = asyncio.create_task(held.client.post(f"/session/{sid}/{route}", json=body))
    try:
        await hold.reached()  # the session was found and the message built, not yet written
        assert (await held.client.delete(f"/session/{sid}")).status_code == 200
        await events.wait_for(lambda f: f.type == "session.deleted")
    finally:
        hold.release.set()
        response = await prompt
        await events.stop()

    assert response.status_code == 404, response.text
    assert response.json() == {"name": "NotFoundError", "data": {"message": f"Session not found: {sid}"}}
    assert held.fake.requests == []
    # Nothing of the refused message went out, so nothing of it was committed.
    assert [f.type for f in events.frames if f.type.startswith("message.")] == []
