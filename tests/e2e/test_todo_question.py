"""The todo and question tools through HTTP: events on SSE, the todo route, answering and dismissing."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.e2e.harness import EventCollector, Frame, LiveServer
from tests.fakes.openai_server import call, reply

TODOS = [
    {"content": "Sketch the schema", "status": "completed", "priority": "high"},
    {"content": "Write the migration", "status": "in_progress", "priority": "medium"},
]
QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which database should we use?",
        "header": "Database",
        "options": [
            {"label": "SQLite", "description": "A single file, nothing to run"},
            {"label": "Postgres", "description": "A server, for many users"},
        ],
    }
]


def _tool_part(result: dict[str, Any], tool: str) -> dict[str, Any]:
    return next(p for p in result["parts"] if p["type"] == "tool" and p["tool"] == tool)


async def _session_with_events(live: LiveServer) -> tuple[str, EventCollector]:
    session = await live.create_session()
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session['id']}")
    return session["id"], events


async def _asked(events: EventCollector) -> Frame:
    return await events.wait_for(lambda f: f.type == "question.asked")


async def test_todowrite_publishes_the_list_and_the_route_returns_it(live: LiveServer) -> None:
    sid, events = await _session_with_events(live)
    assert (await live.client.get(f"/session/{sid}/todo")).json() == []
    live.fake.enqueue(call("todowrite", {"todos": TODOS}), reply("Planned."))
    response = await live.prompt(sid, "Plan the work")
    assert response.status_code == 200, response.text

    updated = await events.wait_for(lambda f: f.type == "todo.updated")
    assert updated.properties == {"sessionID": sid, "todos": TODOS}
    assert updated.id is not None  # durable: the SSE frame carries the session's seq as its id
    tool = _tool_part(await _last_assistant_with_tool(live, sid), "todowrite")
    assert tool["state"]["status"] == "completed" and tool["state"]["title"] == "1 todos"
    todo = await live.client.get(f"/session/{sid}/todo")
    assert todo.status_code == 200 and todo.json() == TODOS
    await events.stop()


async def _last_assistant_with_tool(live: LiveServer, sid: str) -> dict[str, Any]:
    messages = (await live.client.get(f"/session/{sid}/message")).json()
    return next(m for m in messages if any(p["type"] == "tool" for p in m["parts"]))


async def test_the_todo_route_of_an_unknown_session_is_404(live: LiveServer) -> None:
    response = await live.client.get("/session/ses_doesnotexist00000000000000/todo")
    assert response.status_code == 404
    assert response.json()["name"] == "NotFoundError"


async def test_an_answered_question_resumes_the_turn_with_the_answers(live: LiveServer) -> None:
    sid, events = await _session_with_events(live)
    live.fake.enqueue(call("question", {"questions": QUESTIONS}), reply("Postgres it is."))
    prompt = asyncio.create_task(live.prompt(sid, "Set up the database"))

    asked = await _asked(events)
    request_id = asked.properties["id"]
    assert asked.properties["sessionID"] == sid and asked.properties["questions"] == QUESTIONS
    assert set(asked.properties["tool"]) == {"messageID", "callID"}
    listed = (await live.client.get("/question")).json()
    assert [q["id"] for q in listed] == [request_id]
    assert not prompt.done()

    answered = await live.client.post(f"/question/{request_id}/reply", json={"answers": [["Postgres"]]})
    assert answered.status_code == 200 and answered.json() is True
    result = (await asyncio.wait_for(prompt, 10)).json()

    replied = await events.wait_for(lambda f: f.type == "question.replied")
    assert replied.properties == {"sessionID": sid, "requestID": request_id, "answers": [["Postgres"]]}
    assert (await live.client.get("/question")).json() == []
    [text] = [p["text"] for p in result["parts"] if p["type"] == "text"]
    assert text == "Postgres it is."
    tool = _tool_part(await _last_assistant_with_tool(live, sid), "question")
    expected = 'User has answered your questions: "Which database should we use?"="Postgres".'
    assert tool["state"]["status"] == "completed" and tool["state"]["output"].startswith(expected)
    # The model's next call carried the answers.
    [tool_message] = [m for m in live.fake.requests[1]["messages"] if m["role"] == "tool"]
    assert expected in tool_message["content"]
    await events.stop()


async def test_a_dismissed_question_ends_the_turn(live: LiveServer) -> None:
    sid, events = await _session_with_events(live)
    live.fake.enqueue(call("question", {"questions": QUESTIONS}), reply("never asked for"))
    prompt = asyncio.create_task(live.prompt(sid, "Set up the database"))
    request_id = (await _asked(events)).properties["id"]

    rejected = await live.client.post(f"/question/{request_id}/reject")
    assert rejected.status_code == 200 and rejected.json() is True
    result = (await asyncio.wait_for(prompt, 10)).json()

    tool = _tool_part(result, "question")
    assert tool["state"]["status"] == "error"
    assert tool["state"]["error"] == "The user dismissed this question"
    assert len(live.fake.requests) == 1, "the loop must stop instead of calling the model again"
    frame = await events.wait_for(lambda f: f.type == "question.rejected")
    assert frame.properties == {"sessionID": sid, "requestID": request_id}
    assert (await live.client.get("/question")).json() == []
    await events.stop()


async def test_aborting_the_turn_withdraws_its_question(live: LiveServer) -> None:
    sid, events = await _session_with_events(live)
    live.fake.enqueue(call("question", {"questions": QUESTIONS}))
    prompt = asyncio.create_task(live.prompt(sid, "Set up the database"))
    request_id = (await _asked(events)).properties["id"]

    await live.client.post(f"/session/{sid}/abort")
    await asyncio.wait_for(prompt, 10)
    frame = await events.wait_for(lambda f: f.type == "question.rejected")
    assert frame.properties["requestID"] == request_id
    assert (await live.client.get("/question")).json() == []
    late = await live.client.post(f"/question/{request_id}/reply", json={"answers": [["SQLite"]]})
    assert late.status_code == 404
    await events.stop()


async def test_unknown_questions_are_404_and_bad_answers_400(live: LiveServer) -> None:
    for path in ("/question/que_nope/reply", "/question/que_nope/reject"):
        response = await live.client.post(path, json={"answers": [["x"]]})
        assert response.status_code == 404, path
        assert response.json()["name"] == "NotFoundError"
    malformed = await live.client.post("/question/que_nope/reply", json={"answers": "x"})
    assert malformed.status_code == 400
