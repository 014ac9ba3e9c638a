"""The HTTP routes through a real server on a loopback port (KERNEL 1.1)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import httpx2

from agentforge.tools import filetime
from agentforge.version import __version__
from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script, call, reply


def _json(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def _store_user_message(live: LiveServer, session_id: str, text: str) -> dict[str, Any]:
    data: dict[str, Any] = _json(await live.prompt(session_id, text, noReply=True))
    return data


def _texts(parts: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for p in parts if p["type"] == "text"]


# -- global -----------------------------------------------------------------------------------------------


async def test_openapi_lists_the_session_routes(live: LiveServer) -> None:
    spec = _json(await live.client.get("/openapi.json"))
    paths = spec["paths"]
    expected = {
        "/session": {"get", "post"},
        "/session/status": {"get"},
        "/session/{session_id}": {"get", "patch", "delete"},
        "/session/{session_id}/children": {"get"},
        "/session/{session_id}/message": {"get", "post"},
        "/session/{session_id}/message/{message_id}": {"get"},
        "/session/{session_id}/prompt_async": {"post"},
        "/session/{session_id}/abort": {"post"},
        "/event": {"get"},
        "/global/health": {"get"},
    }
    for path, methods in expected.items():
        assert path in paths, f"{path} missing from {sorted(paths)}"
        assert methods <= set(paths[path]), (path, sorted(paths[path]))


async def test_health(live: LiveServer) -> None:
    assert _json(await live.client.get("/global/health")) == {"healthy": True, "version": __version__}


# -- sessions ---------------------------------------------------------------------------------------------


async def test_create_get_and_update_a_session(live: LiveServer) -> None:
    created = await live.create_session(title="Planning")
    assert created["id"].startswith("ses_") and created["title"] == "Planning"
    assert created["directory"] == str(live.workspace)
    assert _json(await live.client.get(f"/session/{created['id']}")) == created

    patched = _json(await live.client.patch(f"/session/{created['id']}", json={"title": "Renamed"}))
    assert patched["title"] == "Renamed"
    assert patched["time"]["updated"] >= created["time"]["updated"]
    stored = _json(await live.client.get(f"/session/{created['id']}"))
    assert stored["title"] == "Renamed"
    missing = await live.client.patch("/session/ses_missing", json={"title": "x"})
    assert missing.status_code == 404


async def test_default_title_says_whether_it_is_a_child(live: LiveServer) -> None:
    parent = await live.create_session()
    child = await live.create_session(parentID=parent["id"])
    assert parent["title"].startswith("New session - ")
    assert child["title"].startswith("Child session - ") and child["parentID"] == parent["id"]


async def test_list_sessions_newest_first_with_roots_search_and_limit(live: LiveServer) -> None:
    alpha = await live.create_session(title="Alpha project")
    beta = await live.create_session(title="Beta notes")
    child = await live.create_session(title="alpha subtask", parentID=alpha["id"])

    listed = _json(await live.client.get("/session"))
    assert [s["id"] for s in listed] == [child["id"], beta["id"], alpha["id"]]
    roots = _json(await live.client.get("/session", params={"roots": "true"}))
    assert [s["id"] for s in roots] == [beta["id"], alpha["id"]]
    found = _json(await live.client.get("/session", params={"search": "ALPHA"}))
    assert [s["id"] for s in found] == [child["id"], alpha["id"]]
    limited = _json(await live.client.get("/session", params={"limit": 2}))
    assert [s["id"] for s in limited] == [child["id"], beta["id"]]
    since = _json(await live.client.get("/session", params={"start": child["time"]["updated"] + 1}))
    assert since == []

    # Updating a session moves it to the front (ordered by time.updated).
    await asyncio.sleep(0.005)
    _json(await live.client.patch(f"/session/{alpha['id']}", json={"title": "Alpha project v2"}))
    listed = _json(await live.client.get("/session"))
    assert listed[0]["id"] == alpha["id"]


async def test_a_deleted_session_leaves_no_record_of_its_reads(live: LiveServer) -> None:
    notes = live.workspace / "notes.txt"
    notes.write_text("hello\n")
    session = await live.create_session(title="reader")
    live.fake.enqueue(call("read", {"filePath": "notes.txt"}), reply("Read it."))
    _json(await live.prompt(session["id"], "Read notes.txt."))
    real = notes.resolve()
    assert filetime.last_read(session["id"], real) is not None  # edit needs it while the session lives
    assert _json(await live.client.delete(f"/session/{session['id']}")) is True
    assert filetime.last_read(session["id"], real) is None


async def test_children_and_recursive_delete(live: LiveServer) -> None:
    parent = await live.create_session(title="parent")
    child = await live.create_session(title="child", parentID=parent["id"])
    grandchild = await live.create_session(title="grandchild", parentID=child["id"])
    other = await live.create_session(title="unrelated")

    children = _json(await live.client.get(f"/session/{parent['id']}/children"))
    assert [c["id"] for c in children] == [child["id"]]
    assert _json(await live.client.get(f"/session/{other['id']}/children")) == []

    assert _json(await live.client.delete(f"/session/{parent['id']}")) is True
    for gone in (parent, child, grandchild):
        response = await live.client.get(f"/session/{gone['id']}")
        assert response.status_code == 404
        assert response.json()["name"] == "NotFoundError"
    remaining = _json(await live.client.get("/session"))
    assert [s["id"] for s in remaining] == [other["id"]]
    assert (await live.client.get(f"/session/{parent['id']}/children")).status_code == 404
    assert (await live.client.delete(f"/session/{parent['id']}")).status_code == 404


async def test_child_of_an_unknown_parent_is_404(live: LiveServer) -> None:
    response = await live.client.post("/session", json={"parentID": "ses_missing"})
    assert response.status_code == 404
    assert _json(await live.client.get("/session")) == []


# -- messages ---------------------------------------------------------------------------------------------


async def test_message_pages_walk_the_history_once(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    for n in range(5):
        await _store_user_message(live, sid, f"message {n}")
    everything = _json(await live.client.get(f"/session/{sid}/message"))
    assert [_texts(m["parts"]) for m in everything] == [[f"message {n}"] for n in range(5)]

    pages: list[list[str]] = []
    response = await live.client.get(f"/session/{sid}/message", params={"limit": 2})
    while True:
        page = _json(response)
        pages.append([m["info"]["id"] for m in page])
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            assert "Link" not in response.headers
            break
        link = response.headers["Link"]
        assert link.endswith('>; rel="next"') and link.startswith(f"<{live.url}/session/{sid}/message?")
        next_url = httpx2.URL(link[1 : link.index(">")])
        assert next_url.params["before"] == cursor and next_url.params["limit"] == "2"
        response = await live.client.get(str(next_url))

    ids = [m["info"]["id"] for m in everything]
    assert pages == [ids[3:5], ids[1:3], ids[0:1]], "newest page first, each page oldest first"


async def test_message_pagination_rejects_bad_queries(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    await _store_user_message(live, sid, "hello")
    # Not base64 at all, and base64 of text that is not JSON.
    for cursor in ["not-a-cursor!", "bm90IGpzb24"]:
        response = await live.client.get(f"/session/{sid}/message", params={"limit": 2, "before": cursor})
        assert response.status_code == 400, cursor
        assert response.json()["name"] == "BadRequestError"
    response = await live.client.get(f"/session/{sid}/message", params={"before": "eyJpZCI6MX0"})
    assert response.status_code == 400
    assert "limit" in response.json()["data"]["message"]
    assert (await live.client.get(f"/session/{sid}/message", params={"limit": -1})).status_code == 400


async def test_get_one_message(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    stored = await _store_user_message(live, sid, "remember me")
    fetched = _json(await live.client.get(f"/session/{sid}/message/{stored['info']['id']}"))
    assert fetched == stored
    missing = await live.client.get(f"/session/{sid}/message/msg_000000000000unknownunknow")
    assert missing.status_code == 404
    assert missing.json()["name"] == "NotFoundError"


# -- prompting --------------------------------------------------------------------------------------------


async def test_no_reply_stores_only_the_user_message(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    returned = await _store_user_message(live, sid, "just a note")
    assert returned["info"]["role"] == "user" and returned["info"]["sessionID"] == sid
    assert _texts(returned["parts"]) == ["just a note"]
    assert _json(await live.client.get(f"/session/{sid}/message")) == [returned]
    assert live.fake.requests == [], "no model call"
    assert _json(await live.client.get("/session/status")) == {}


async def test_prompt_async_answers_204_and_the_turn_completes(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    live.fake.enqueue(reply("done in the background"))
    body = {"parts": [{"type": "text", "text": "work quietly"}]}
    response = await live.client.post(f"/session/{sid}/prompt_async", json=body)
    assert response.status_code == 204 and response.content == b""
    await events.wait_for(lambda f: f.type == "session.idle")
    await events.stop()
    history = _json(await live.client.get(f"/session/{sid}/message"))
    assert [m["info"]["role"] for m in history] == ["user", "assistant"]
    assert _texts(history[1]["parts"]) == ["done in the background"]


async def test_status_is_busy_while_a_turn_runs(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("thinking...").pause(gate).text(" done").finish("stop"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    prompt = asyncio.create_task(live.prompt(sid, "take your time"))
    try:
        await events.wait_for(lambda f: f.type == "message.part.delta")
        assert _json(await live.client.get("/session/status")) == {sid: {"type": "busy"}}
    finally:
        gate.set()
    assert (await prompt).status_code == 200
    await events.wait_for(lambda f: f.type == "session.idle")
    await events.stop()
    assert _json(await live.client.get("/session/status")) == {}


async def test_file_url_inside_the_workspace_is_expanded_into_text(live: LiveServer) -> None:
    notes = live.workspace / "notes.txt"
    notes.write_text("alpha line\nbeta line\n")
    session = await live.create_session()
    parts = [
        {"type": "text", "text": "summarise this"},
        {"type": "file", "mime": "text/plain", "filename": "notes.txt", "url": notes.as_uri()},
    ]
    returned = _json(
        await live.client.post(f"/session/{session['id']}/message", json={"parts": parts, "noReply": True})
    )
    stored = _json(await live.client.get(f"/session/{session['id']}/message/{returned['info']['id']}"))
    assert stored == returned
    kinds = [(p["type"], p.get("synthetic")) for p in stored["parts"]]
    assert kinds == [("text", None), ("text", True), ("text", True), ("file", None)]
    call_text, content = stored["parts"][1]["text"], stored["parts"][2]["text"]
    assert call_text.startswith("Called the Read tool with the following input: ")
    assert str(notes) in call_text
    assert "alpha line" in content and "beta line" in content
    assert stored["parts"][3]["url"] == notes.as_uri() and stored["parts"][3]["mime"] == "text/plain"


async def test_a_file_url_outside_the_workspace_is_refused_and_nothing_is_stored(live: LiveServer) -> None:
    secret = live.workspace.parent / "secret.txt"
    secret.write_text("do not leak\n")
    session = await live.create_session()
    sid = session["id"]
    for mime in ("text/plain", "application/octet-stream"):
        parts = [
            {"type": "text", "text": "read that"},
            {"type": "file", "mime": mime, "url": secret.as_uri()},
        ]
        response = await live.client.post(f"/session/{sid}/message", json={"parts": parts})
        assert response.status_code == 400, response.text
        message = response.json()["data"]["message"]
        workspace = live.workspace.resolve()
        assert message == f"Refusing to access {secret}: it is outside the workspace {workspace}."
        assert "do not leak" not in response.text
    assert _json(await live.client.get(f"/session/{sid}/message")) == []
    assert live.fake.requests == []


async def test_a_malformed_data_url_is_refused(live: LiveServer) -> None:
    session = await live.create_session()
    parts = [{"type": "file", "mime": "text/plain", "filename": "a.txt", "url": "data:text/plain;base64,@@@"}]
    response = await live.client.post(f"/session/{session['id']}/message", json={"parts": parts})
    assert response.status_code == 400, response.text
    assert response.json()["data"]["message"] == "parts: the data URL of a.txt is not valid base64"
    assert _json(await live.client.get(f"/session/{session['id']}/message")) == []


async def test_data_url_text_becomes_synthetic_text(live: LiveServer) -> None:
    session = await live.create_session()
    payload = base64.b64encode(b"pasted snippet\nsecond line").decode()
    parts = [
        {
            "type": "file",
            "mime": "text/plain",
            "filename": "snippet.txt",
            "url": f"data:text/plain;base64,{payload}",
        }
    ]
    returned = _json(
        await live.client.post(f"/session/{session['id']}/message", json={"parts": parts, "noReply": True})
    )
    stored = _json(await live.client.get(f"/session/{session['id']}/message"))
    assert stored == [returned]
    user_parts = returned["parts"]
    assert [(p["type"], p.get("synthetic")) for p in user_parts] == [
        ("text", True),
        ("text", True),
        ("file", None),
    ]
    assert (
        user_parts[0]["text"] == 'Called the Read tool with the following input: {"filePath":"snippet.txt"}'
    )
    assert user_parts[1]["text"] == "pasted snippet\nsecond line"


async def test_a_session_directory_must_exist_inside_the_workspace(live: LiveServer, tmp_path: Path) -> None:
    inside = live.workspace / "pkg"
    inside.mkdir()
    created = await live.client.post("/session", json={"directory": str(inside)})
    assert created.status_code == 200 and created.json()["directory"] == str(inside)
    escape = live.workspace / "out"
    escape.symlink_to(tmp_path)
    for directory, words in [
        ("relative/path", "absolute path"),
        (str(live.workspace / "missing"), "does not exist"),
        (str(tmp_path), "outside the server's workspace"),
        (str(escape), "outside the server's workspace"),
    ]:
        response = await live.client.post("/session", json={"directory": directory})
        assert response.status_code == 400, directory
        assert words in response.json()["data"]["message"]
    assert len((await live.client.get("/session")).json()) == 1, "rejected sessions are not stored"
