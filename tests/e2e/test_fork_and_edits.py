"""Fork, message and part deletion, and part replacement through HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script


def _answer(text: str, prompt_tokens: int, completion_tokens: int) -> Script:
    return Script().text(text).usage(prompt_tokens, completion_tokens).finish()


async def _two_turns(live: LiveServer, title: str = "original") -> tuple[str, list[dict[str, Any]]]:
    session = await live.create_session(title=title)
    live.fake.enqueue(_answer("first answer", 100, 10), _answer("second answer", 200, 20))
    for text in ("first question", "second question"):
        assert (await live.prompt(session["id"], text)).status_code == 200
    return session["id"], await _messages(live, session["id"])


async def _messages(live: LiveServer, session_id: str) -> list[dict[str, Any]]:
    response = await live.client.get(f"/session/{session_id}/message")
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()
    return result


async def _session(live: LiveServer, session_id: str) -> dict[str, Any]:
    result: dict[str, Any] = (await live.client.get(f"/session/{session_id}")).json()
    return result


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for m in messages for p in m["parts"] if p["type"] == "text"]


def _part(message: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(p for p in message["parts"] if p["type"] == kind)


async def test_fork_copies_every_message_with_new_ids(live: LiveServer) -> None:
    source_id, source = await _two_turns(live)

    response = await live.client.post(f"/session/{source_id}/fork")

    assert response.status_code == 200, response.text
    fork = response.json()
    assert fork["id"] != source_id and fork["title"] == "original (fork #1)" and "parentID" not in fork
    copied = await _messages(live, fork["id"])
    assert (
        _texts(copied)
        == _texts(source)
        == ["first question", "first answer", "second question", "second answer"]
    )
    new_ids = [m["info"]["id"] for m in copied]
    assert new_ids == sorted(new_ids) and not set(new_ids) & {m["info"]["id"] for m in source}
    assert all(m["info"]["sessionID"] == fork["id"] for m in copied)
    # Replies point at the copies of their questions; every part is a new row of the fork.
    assert copied[1]["info"]["parentID"] == copied[0]["info"]["id"]
    assert copied[3]["info"]["parentID"] == copied[2]["info"]["id"]
    source_parts = {p["id"] for m in source for p in m["parts"]}
    for message in copied:
        for part in message["parts"]:
            assert part["id"] not in source_parts
            assert (part["messageID"], part["sessionID"]) == (message["info"]["id"], fork["id"])
    # The copied steps count toward the fork's totals; the source keeps its own.
    assert fork["tokens"]["input"] == 300 and fork["tokens"]["output"] == 30
    assert (await _session(live, source_id))["tokens"]["input"] == 300
    assert fork["model"] == (await _session(live, source_id))["model"]


async def test_fork_up_to_a_message_and_fork_numbering(live: LiveServer) -> None:
    source_id, source = await _two_turns(live, title="plan (fork #4)")
    second_question = source[2]["info"]["id"]

    response = await live.client.post(f"/session/{source_id}/fork", json={"messageID": second_question})

    fork = response.json()
    assert fork["title"] == "plan (fork #5)"
    assert _texts(await _messages(live, fork["id"])) == ["first question", "first answer"]
    assert fork["tokens"]["input"] == 100

    again = (await live.client.post(f"/session/{fork['id']}/fork")).json()
    assert again["title"] == "plan (fork #6)"
    unknown_message = await live.client.post(f"/session/{source_id}/fork", json={"messageID": "msg_nope"})
    assert unknown_message.status_code == 404
    assert (await live.client.post("/session/ses_unknown/fork")).status_code == 404


async def test_deleting_a_message_removes_it_and_its_usage(live: LiveServer) -> None:
    session_id, messages = await _two_turns(live)
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session_id}")
    first_answer = messages[1]["info"]["id"]

    response = await live.client.delete(f"/session/{session_id}/message/{first_answer}")

    assert response.status_code == 200 and response.json() is True
    assert _texts(await _messages(live, session_id)) == ["first question", "second question", "second answer"]
    totals = (await _session(live, session_id))["tokens"]
    assert (totals["input"], totals["output"]) == (200, 20)
    removed = await events.wait_for(lambda f: f.type == "message.removed")
    assert removed.properties == {"sessionID": session_id, "messageID": first_answer}
    await events.stop()
    assert (await live.client.get(f"/session/{session_id}/message/{first_answer}")).status_code == 404
    assert (await live.client.delete(f"/session/{session_id}/message/{first_answer}")).status_code == 404
    assert (await live.client.delete(f"/session/ses_unknown/message/{first_answer}")).status_code == 404


async def test_deleting_a_part(live: LiveServer) -> None:
    session_id, messages = await _two_turns(live)
    answer = messages[3]
    text, finish = _part(answer, "text"), _part(answer, "step-finish")
    base = f"/session/{session_id}/message/{answer['info']['id']}/part"

    assert (await live.client.delete(f"{base}/{text['id']}")).json() is True
    assert (await live.client.delete(f"{base}/{finish['id']}")).json() is True

    stored = (await live.client.get(f"/session/{session_id}/message/{answer['info']['id']}")).json()
    assert {p["id"] for p in stored["parts"]}.isdisjoint({text["id"], finish["id"]})
    totals = (await _session(live, session_id))["tokens"]
    assert (totals["input"], totals["output"]) == (100, 10)
    assert (await live.client.delete(f"{base}/{text['id']}")).status_code == 404
    other_message = messages[1]["info"]["id"]
    wrong_message = f"/session/{session_id}/message/{other_message}/part/{_part(answer, 'step-start')['id']}"
    assert (await live.client.delete(wrong_message)).status_code == 404


async def test_replacing_a_part(live: LiveServer) -> None:
    session_id, messages = await _two_turns(live)
    answer = messages[1]
    url = f"/session/{session_id}/message/{answer['info']['id']}/part"
    text = _part(answer, "text")

    response = await live.client.patch(f"{url}/{text['id']}", json={**text, "text": "edited answer"})

    assert response.status_code == 200, response.text
    assert response.json()["text"] == "edited answer"
    assert _texts(await _messages(live, session_id))[1] == "edited answer"
    # A step-finish replaced with other numbers moves the totals by the difference.
    finish = _part(answer, "step-finish")
    tokens = {**finish["tokens"], "input": 40}
    assert (
        await live.client.patch(f"{url}/{finish['id']}", json={**finish, "tokens": tokens})
    ).status_code == 200
    assert (await _session(live, session_id))["tokens"]["input"] == 240

    mismatched = await live.client.patch(f"{url}/{text['id']}", json={**text, "id": finish["id"]})
    assert mismatched.status_code == 400
    retyped = {**finish, "type": "text", "text": "not a step"}
    assert (await live.client.patch(f"{url}/{finish['id']}", json=retyped)).status_code == 400
    unknown = {**text, "id": "prt_unknown"}
    assert (await live.client.patch(f"{url}/prt_unknown", json=unknown)).status_code == 404
    assert (await live.client.patch(f"{url}/{text['id']}", json={"type": "text"})).status_code == 400


async def test_history_edits_are_refused_while_the_session_is_busy(live: LiveServer) -> None:
    session_id, messages = await _two_turns(live)
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("thinking...").pause(gate).text(" done").finish())
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session_id}")
    running = asyncio.create_task(live.prompt(session_id, "third question"))
    await events.wait_for(lambda f: f.type == "message.part.delta")
    answer = messages[1]
    text = _part(answer, "text")
    url = f"/session/{session_id}/message/{answer['info']['id']}"

    busy = [
        await live.client.delete(url),
        await live.client.delete(f"{url}/part/{text['id']}"),
        await live.client.patch(f"{url}/part/{text['id']}", json={**text, "text": "x"}),
    ]
    # A fork taken meanwhile holds what is finished: the new question, not the reply being written.
    fork = (await live.client.post(f"/session/{session_id}/fork")).json()

    gate.set()
    assert (await running).status_code == 200
    await events.stop()
    for response in busy:
        assert response.status_code == 409, response.text
        assert response.json()["name"] == "SessionBusyError"
    assert _texts(await _messages(live, fork["id"]))[-2:] == ["second answer", "third question"]
    assert len(await _messages(live, session_id)) == 6
    # Once idle, the same edits go through.
    assert (await live.client.delete(f"{url}/part/{text['id']}")).status_code == 200
    assert (await live.client.delete(url)).status_code == 200
    assert len(await _messages(live, session_id)) == 5
