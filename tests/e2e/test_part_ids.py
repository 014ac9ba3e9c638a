"""Client-chosen part ids cannot collide (issue 11, item 3): a part id another message holds, in
this session, another session or another tenant, answers 400 naming the field, stores nothing and
overwrites nothing; the model is never called for the refused prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentforge.model.ids import ascending
from tests.e2e.harness import LiveServer
from tests.e2e.test_tenant_isolation import two_tenants
from tests.fakes.openai_server import FakeOpenAI, reply


def body(*texts_and_ids: tuple[str, str | None], message_id: str | None = None) -> dict[str, Any]:
    parts = [{"type": "text", "text": text, **({"id": pid} if pid else {})} for text, pid in texts_and_ids]
    return {"parts": parts, **({"messageID": message_id} if message_id else {})}


async def send(client: httpx2.AsyncClient, sid: str, sent: dict[str, Any]) -> httpx2.Response:
    return await client.post(f"/session/{sid}/message", json=sent)


async def history(client: httpx2.AsyncClient, sid: str) -> bytes:
    return (await client.get(f"/session/{sid}/message")).content


async def first_part_id(client: httpx2.AsyncClient, sid: str) -> str:
    messages = (await client.get(f"/session/{sid}/message")).json()
    return str(messages[0]["parts"][0]["id"])


async def test_a_part_id_of_an_earlier_message_in_the_same_session_is_refused(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    chosen = ascending("prt")
    live.fake.enqueue(reply("first answer"))
    assert (await send(live.client, sid, body(("original", chosen)))).status_code == 200
    before = await history(live.client, sid)

    again = await send(live.client, sid, body(("fresh", None), ("rewrite", chosen)))

    assert again.status_code == 400, again.text
    expected = f"parts[1].id: part id {chosen} cannot be used: send a new prt_ id"
    assert again.json()["data"]["message"] == expected
    assert await history(live.client, sid) == before
    assert len(live.fake.requests) == 1


async def test_a_part_id_of_another_session_is_refused_and_nothing_is_stored(live: LiveServer) -> None:
    first = (await live.create_session())["id"]
    second = (await live.create_session())["id"]
    live.fake.enqueue(reply("first answer"))
    assert (await send(live.client, first, body(("hello", None)))).status_code == 200
    taken = await first_part_id(live.client, first)
    before = await history(live.client, first)

    message_id = ascending("msg")
    sent = body(("mine", ascending("prt")), ("theirs", taken), message_id=message_id)
    refused = await send(live.client, second, sent)

    assert refused.status_code == 400, refused.text
    assert refused.json()["data"]["message"].startswith("parts[1].id: ")
    assert (await live.client.get(f"/session/{second}/message")).json() == []  # not even the first part
    assert await history(live.client, first) == before
    assert len(live.fake.requests) == 1
    # The message id of the refused prompt was not taken by it: it may be sent again, whole.
    live.fake.enqueue(reply("second answer"))
    retried = await live.client.post(
        f"/session/{second}/message", json=body(("mine", ascending("prt")), message_id=message_id)
    )
    assert retried.status_code == 200, retried.text


async def test_bad_part_ids_answer_400_before_anything_is_written(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    twice = ascending("prt")
    cases = {
        "parts[0].id must be a prt_ id": body(("x", "msg_not_a_part")),
        "parts[1].id": body(("x", twice), ("y", twice)),
    }
    for expected, sent in cases.items():
        response = await live.client.post(f"/session/{sid}/message", json=sent)
        assert response.status_code == 400, response.text
        assert response.json()["data"]["message"].startswith(expected)
    assert (await live.client.get(f"/session/{sid}/message")).json() == []
    assert live.fake.requests == []


async def test_a_part_id_of_another_tenant_is_refused_the_same_as_one_of_the_same_tenant(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with two_tenants(tmp_path, fake_openai, database_url) as forge:
        a_sid = (await forge.a.client.post("/session")).json()["id"]
        b_first = (await forge.b.client.post("/session")).json()["id"]
        b_second = (await forge.b.client.post("/session")).json()["id"]
        forge.live.fake.enqueue(reply("for A"), reply("for B"))
        for client, sid in ((forge.a.client, a_sid), (forge.b.client, b_first)):
            assert (await client.post(f"/session/{sid}/message", json=body(("hi", None)))).status_code == 200
        a_part = await first_part_id(forge.a.client, a_sid)
        b_part = await first_part_id(forge.b.client, b_first)
        a_before = await history(forge.a.client, a_sid)

        answers = {}
        for taken in (a_part, b_part):
            sent = body(("reuse", taken))
            answers[taken] = await forge.b.client.post(f"/session/{b_second}/message", json=sent)

        assert answers[a_part].status_code == answers[b_part].status_code == 400
        assert answers[a_part].content.replace(a_part.encode(), b_part.encode()) == answers[b_part].content
        assert await history(forge.a.client, a_sid) == a_before
        assert (await forge.b.client.get(f"/session/{b_second}/message")).json() == []
        assert len(forge.live.fake.requests) == 2


@pytest.fixture
async def seeded(live: LiveServer) -> list[str]:
    """Two sessions of one live server, each with one answered prompt (shared by all examples)."""
    sessions = [(await live.create_session())["id"] for _ in range(2)]
    for sid in sessions:
        live.fake.enqueue(reply("seeded"))
        assert (await send(live.client, sid, body(("seed", None)))).status_code == 200
    return sessions


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reuse=st.lists(st.booleans(), min_size=1, max_size=4), target=st.integers(min_value=0, max_value=1))
async def test_property_random_part_id_reuse_is_refused_and_history_is_unchanged(
    live: LiveServer, seeded: list[str], reuse: list[bool], target: int
) -> None:
    """Any prompt that reuses at least one stored part id (of either session) is refused whole."""
    sessions = seeded
    stored = [await first_part_id(live.client, sid) for sid in sessions]
    before = [await history(live.client, sid) for sid in sessions]
    calls = len(live.fake.requests)
    parts = [(f"text {i}", stored[i % 2] if again else ascending("prt")) for i, again in enumerate(reuse)]
    if not any(reuse):
        live.fake.enqueue(reply("answered"))

    response = await send(live.client, sessions[target], body(*parts))

    if any(reuse):
        assert response.status_code == 400, response.text
        assert [await history(live.client, sid) for sid in sessions] == before
        assert len(live.fake.requests) == calls
    else:
        assert response.status_code == 200, response.text


async def _answered(live: LiveServer) -> tuple[str, dict[str, Any]]:
    """A session with one exchange; its assistant message (with parts) as listed."""
    sid = (await live.create_session())["id"]
    live.fake.enqueue(reply("the answer"))
    assert (await send(live.client, sid, body(("question", None)))).status_code == 200
    messages = (await live.client.get(f"/session/{sid}/message")).json()
    (assistant,) = [m for m in messages if m["info"]["role"] == "assistant"]
    return sid, assistant


async def test_a_message_id_of_this_sessions_assistant_message_is_refused(live: LiveServer) -> None:
    sid, assistant = await _answered(live)
    before = await history(live.client, sid)

    # The message and its own part's ids: before, this replaced the assistant's answer in place.
    taken = assistant["info"]["id"]
    sent = {"noReply": True, **body(("overwrite", assistant["parts"][-1]["id"]), message_id=taken)}
    refused = await send(live.client, sid, sent)

    assert refused.status_code == 400, refused.text
    assert refused.json()["data"]["message"] == f"messageID {taken} cannot be used: send a new msg_ id"
    assert await history(live.client, sid) == before


async def test_a_message_id_of_this_sessions_user_message_is_refused(live: LiveServer) -> None:
    sid, assistant = await _answered(live)
    before = await history(live.client, sid)

    taken = assistant["info"]["parentID"]
    refused = await send(live.client, sid, {"noReply": True, **body(("again", None), message_id=taken)})

    assert refused.status_code == 400, refused.text
    assert refused.json()["data"]["message"].startswith("messageID ")
    assert await history(live.client, sid) == before


async def test_a_part_id_of_this_sessions_assistant_part_is_refused(live: LiveServer) -> None:
    # Refused before too (the part's message differs); kept as the other half of the guarantee.
    sid, assistant = await _answered(live)
    before = await history(live.client, sid)

    taken = assistant["parts"][-1]["id"]
    refused = await send(live.client, sid, {"noReply": True, **body(("overwrite", taken))})

    assert refused.status_code == 400, refused.text
    assert (
        refused.json()["data"]["message"]
        == f"parts[0].id: part id {taken} cannot be used: send a new prt_ id"
    )
    assert await history(live.client, sid) == before


async def test_a_chosen_message_id_older_than_the_last_reply_is_answered_with_it_sent_last(
    live: LiveServer,
) -> None:
    """A client's clock behind the server's: its messageID sorts before the reply to its previous
    message. That reply does not answer it: the model is asked again, with it as the last message
    (a request ending in the old reply would ask the model to go on with that reply)."""
    sid = (await live.create_session())["id"]
    first_id, second_id = ascending("msg"), ascending("msg")
    live.fake.enqueue(reply("one done"), reply("two done"))
    assert (await send(live.client, sid, body(("one", None), message_id=first_id))).status_code == 200

    answered = await send(live.client, sid, body(("two", None), message_id=second_id))

    assert answered.status_code == 200, answered.text
    assert answered.json()["info"]["parentID"] == second_id
    assert [p["text"] for p in answered.json()["parts"] if p["type"] == "text"] == ["two done"]
    assert len(live.fake.requests) == 2
    assert live.fake.requests[1]["messages"][-1] == {"role": "user", "content": "two"}
