"""A client that chose its prompt's `messageID` may send it again after losing the answer: the same
content gets the first attempt's answer without a second turn; other content under that id is
refused, naming `messageID`, and changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from agentforge.model.ids import ascending
from tests.e2e import held_prompts
from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script, reply


def prompt(text: str, message_id: str, **extra: Any) -> dict[str, Any]:
    return {"messageID": message_id, "parts": [{"type": "text", "text": text}], **extra}


async def history(live: LiveServer, sid: str) -> bytes:
    return (await live.client.get(f"/session/{sid}/message")).content


async def test_the_same_prompt_sent_again_gets_the_stored_answer_without_a_second_turn(
    live: LiveServer,
) -> None:
    sid = (await live.create_session())["id"]
    sent = prompt("what is two and two?", ascending("msg"))
    live.fake.enqueue(reply("four"))
    first = await live.client.post(f"/session/{sid}/message", json=sent)
    assert first.status_code == 200, first.text
    before = await history(live, sid)

    again = await live.client.post(f"/session/{sid}/message", json=sent)

    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert again.json()["info"]["parentID"] == sent["messageID"]
    assert len(live.fake.requests) == 1
    assert await history(live, sid) == before


async def test_an_earlier_prompt_sent_again_gets_its_own_answer(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    earlier = prompt("first", ascending("msg"))
    live.fake.enqueue(reply("answer one"), reply("answer two"))
    first = await live.client.post(f"/session/{sid}/message", json=earlier)
    assert (
        await live.client.post(f"/session/{sid}/message", json=prompt("second", ascending("msg")))
    ).is_success

    again = await live.client.post(f"/session/{sid}/message", json=earlier)

    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert len(live.fake.requests) == 2


async def test_a_retry_while_the_first_attempt_runs_waits_for_the_same_answer(held: LiveServer) -> None:
    sid = (await held.create_session())["id"]
    sent = prompt("take your time", ascending("msg"))
    gate = asyncio.Event()
    held.fake.enqueue(Script().text("slowly").pause(gate).finish("stop"))
    events = EventCollector()
    await events.start(held.client, f"/event?sessionID={sid}")
    first = asyncio.create_task(held.client.post(f"/session/{sid}/message", json=sent))
    await events.wait_for(lambda f: f.type == "message.part.delta")

    hold = held_prompts.hold(sid)
    retry = asyncio.create_task(held.client.post(f"/session/{sid}/message", json=sent))
    await hold.reached()  # the retry arrived while the first attempt's turn still streams
    hold.release.set()
    gate.set()
    answers = await asyncio.gather(first, retry)
    await events.stop()

    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert answers[0].json() == answers[1].json()
    assert [p["text"] for p in answers[1].json()["parts"] if p["type"] == "text"] == ["slowly"]
    assert len(held.fake.requests) == 1


async def test_other_content_under_a_used_message_id_is_refused_and_changes_nothing(
    live: LiveServer,
) -> None:
    sid = (await live.create_session())["id"]
    message_id = ascending("msg")
    live.fake.enqueue(reply("done"))
    assert (await live.client.post(f"/session/{sid}/message", json=prompt("one", message_id))).is_success
    before = await history(live, sid)

    for changed in (
        prompt("another text", message_id),
        prompt("one", message_id, system="Answer in French."),
        prompt("one", message_id, agent="plan"),
        {
            "messageID": message_id,
            "parts": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
    ):
        refused = await live.client.post(f"/session/{sid}/message", json=changed)
        assert refused.status_code == 400, refused.text
        assert (
            refused.json()["data"]["message"] == f"messageID {message_id} cannot be used: send a new msg_ id"
        )

    assert await history(live, sid) == before
    assert len(live.fake.requests) == 1


async def test_a_no_reply_prompt_sent_again_gets_the_stored_user_message(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    sent = prompt("just note this", ascending("msg"), noReply=True)
    first = await live.client.post(f"/session/{sid}/message", json=sent)
    assert first.status_code == 200, first.text

    again = await live.client.post(f"/session/{sid}/message", json=sent)

    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert live.fake.requests == []


async def test_prompt_async_sent_again_is_accepted_without_a_second_turn(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    sent = prompt("in the background", ascending("msg"))
    live.fake.enqueue(reply("done in the background"))
    assert (await live.client.post(f"/session/{sid}/prompt_async", json=sent)).status_code == 204
    await live.background_settled()
    before = await history(live, sid)

    again = await live.client.post(f"/session/{sid}/prompt_async", json=sent)
    await live.background_settled()

    assert again.status_code == 204, again.text
    assert len(live.fake.requests) == 1
    assert await history(live, sid) == before
    # The synchronous route, sent the same prompt, answers with the turn's reply.
    answer = await live.client.post(f"/session/{sid}/message", json=sent)
    assert [p["text"] for p in answer.json()["parts"] if p["type"] == "text"] == ["done in the background"]


async def test_the_same_prompt_sent_twice_at_once_runs_one_turn(held: LiveServer) -> None:
    sid = (await held.create_session())["id"]
    sent = prompt("twice at once", ascending("msg"))
    held.fake.enqueue(reply("once"))
    hold = held_prompts.hold(sid)
    # Both are held just before their write, so neither finds the other's message stored yet.
    first = asyncio.create_task(held.client.post(f"/session/{sid}/message", json=sent))
    second = asyncio.create_task(held.client.post(f"/session/{sid}/message", json=sent))
    await hold.reached(2)
    hold.release.set()
    answers = await asyncio.gather(first, second)

    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert answers[0].json() == answers[1].json()
    assert len(held.fake.requests) == 1
    users = [
        m for m in (await held.client.get(f"/session/{sid}/message")).json() if m["info"]["role"] == "user"
    ]
    assert [m["info"]["id"] for m in users] == [sent["messageID"]]
