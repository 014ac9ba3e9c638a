"""Permissions through HTTP: rules decide, `ask` holds the tool call until a person answers over
HTTP (or the deadline does), and the model only sees the tools the rules leave it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.store.engine import parse_database_url
from agentforge.store.migrate import run_with_connection
from agentforge.testing import FakeClock
from tests.databases import owner_url_for
from tests.e2e.harness import EventCollector, Frame, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply
from tests.tools.harness import text_of


@contextlib.asynccontextmanager
async def server(
    tmp_path: Path, fake: FakeOpenAI, database_url: str, clock: Clock = SYSTEM_CLOCK, **config: Any
) -> AsyncIterator[tuple[LiveServer, EventCollector]]:
    async with start_live_server(
        tmp_path, fake, {**fake_provider_config(fake), **config}, database_url=database_url, clock=clock
    ) as live:
        events = EventCollector()
        await events.start(live.client)
        try:
            yield live, events
        finally:
            await events.stop()


def bash(command: str) -> dict[str, str]:
    return {"command": command, "description": "Run a command"}


def asked(events: EventCollector, permission: str, start: int = 0) -> Any:
    return events.wait_for(
        lambda f: f.type == "permission.asked" and f.properties["permission"] == permission, start=start
    )


def tool_parts(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in result["parts"] if p["type"] == "tool"]


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


async def stored_request(database_url: str, request_id: str) -> dict[str, Any]:
    """The request's row, read with raw SQL (as the owner: row-level security hides it from a runtime
    role that set no tenant)."""
    found: dict[str, Any] = {}

    def read(conn: Connection) -> None:
        row = conn.execute(
            text("SELECT status, decision, decided_by, feedback FROM permission_request WHERE id = :id"),
            {"id": request_id},
        ).one()
        found.update(row._mapping)

    owner = parse_database_url(owner_url_for(database_url) or database_url)
    await asyncio.to_thread(run_with_connection, owner, read)
    return found


async def reply_to(live: LiveServer, frame: Frame, reply_kind: str, message: str | None = None) -> None:
    body: dict[str, Any] = {"reply": reply_kind}
    if message is not None:
        body["message"] = message
    response = await live.client.post(f"/permission/{frame.properties['id']}/reply", json=body)
    assert response.status_code == 200 and response.json() is True


async def test_ask_holds_the_call_until_once(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"bash": "ask"}) as (live, events):
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("bash", bash("echo approved-run")), reply("It ran."))
        prompt = asyncio.create_task(live.prompt(sid, "run it"))

        request = await asked(events, "bash")
        assert request.properties["sessionID"] == sid
        assert request.properties["patterns"] == ["echo approved-run"]
        assert request.properties["always"] == ["echo *"]
        assert set(request.properties["tool"]) == {"messageID", "callID"}
        pending = (await live.client.get("/permission")).json()
        assert [p["id"] for p in pending] == [request.properties["id"]]
        # While it waits, the tool part stays running and the turn does not go on.
        tool_updates = [
            f.properties["part"]
            for f in events.of_type("message.part.updated")
            if f.properties["part"]["type"] == "tool"
        ]
        assert tool_updates[-1]["state"]["status"] == "running"
        assert not prompt.done() and len(live.fake.requests) == 1

        await reply_to(live, request, "once")
        result = (await asyncio.wait_for(prompt, 10)).json()
        [tool] = tool_parts((await live.client.get(f"/session/{sid}/message")).json()[1])
        assert tool["state"]["status"] == "completed"
        assert "approved-run" in tool["state"]["output"]
        assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["It ran."]
        assert (await live.client.get("/permission")).json() == []
        replied = await events.wait_for(lambda f: f.type == "permission.replied")
        assert replied.properties["requestID"] == request.properties["id"]
        assert (replied.properties["reply"], replied.properties["sessionID"]) == ("once", sid)
        row = await stored_request(database_url, request.properties["id"])
        assert (row["status"], row["decision"], row["decided_by"]) == ("approved", "once", "local")


async def test_a_file_changed_while_its_edit_waits_for_approval_keeps_the_change(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"edit": "ask"}) as (live, events):
        notes = live.workspace / "notes.txt"
        notes.write_text("draft\n")
        sid = (await live.create_session())["id"]
        live.fake.enqueue(
            call("read", {"filePath": "notes.txt"}),
            call("edit", {"filePath": "notes.txt", "oldString": "draft", "newString": "final"}),
            reply("It changed under me."),
        )
        prompt = asyncio.create_task(live.prompt(sid, "finish the notes"))
        request = await asked(events, "edit")
        notes.write_text("draft\nand a line someone added meanwhile\n")  # e.g. in their editor
        await reply_to(live, request, "once")
        assert (await asyncio.wait_for(prompt, 10)).status_code == 200

        assert text_of(notes) == "draft\nand a line someone added meanwhile\n"
        history = (await live.client.get(f"/session/{sid}/message")).json()
        [edit] = [part for item in history for part in tool_parts(item) if part["tool"] == "edit"]
        assert edit["state"]["status"] == "error"
        assert f"File {notes} was modified while this change waited" in edit["state"]["error"]
        answered = live.fake.requests[-1]["messages"][-1]
        assert answered["role"] == "tool" and "was modified while this change waited" in str(answered)


async def test_a_symlink_swapped_in_while_a_read_waits_for_approval_is_not_followed(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("what this workspace must not see\n")
    async with server(tmp_path, fake_openai, database_url, permission={"read": "ask"}) as (live, events):
        notes = live.workspace / "notes.txt"
        notes.write_text("notes\n")
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("read", {"filePath": "notes.txt"}), reply("Done."))
        prompt = asyncio.create_task(live.prompt(sid, "read the notes"))
        request = await asked(events, "read")
        notes.unlink()  # what a command running beside the call may do
        notes.symlink_to(secret)
        await reply_to(live, request, "once")
        assert (await asyncio.wait_for(prompt, 10)).status_code == 200

        [read] = tool_parts((await live.client.get(f"/session/{sid}/message")).json()[1])
        assert read["state"]["status"] == "error"
        assert "no longer where its path led" in read["state"]["error"]
        assert "must not see" not in str(live.fake.requests)


async def test_reject_with_feedback_stops_the_loop_and_the_model_reads_it(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"bash": "ask"}) as (live, events):
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("bash", bash("rm -rf build")))
        prompt = asyncio.create_task(live.prompt(sid, "clean up"))
        request = await asked(events, "bash")
        await reply_to(live, request, "reject", "Use `make clean` instead.")

        result = (await asyncio.wait_for(prompt, 10)).json()
        [tool] = tool_parts(result)
        assert tool["state"]["status"] == "error"
        assert tool["state"]["error"].endswith("with the following feedback: Use `make clean` instead.")
        assert len(live.fake.requests) == 1, "the loop stopped after the rejected step"
        assert result["info"].get("error") is None
        row = await stored_request(database_url, request.properties["id"])
        assert (row["status"], row["decision"], row["feedback"]) == (
            "denied",
            "reject",
            "Use `make clean` instead.",
        )

        live.fake.enqueue(reply("Understood, I will use make clean."))
        assert (await live.prompt(sid, "ok, go on")).status_code == 200
        tool_results = [m for m in live.fake.requests[-1]["messages"] if m["role"] == "tool"]
        assert "Use `make clean` instead." in tool_results[0]["content"]


async def test_always_releases_another_waiting_call(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"bash": "ask"}) as (live, events):
        sid = (await live.create_session())["id"]
        live.fake.enqueue(
            Script()
            .tool_call("bash", bash("echo first"))
            .tool_call("bash", bash("echo second"))
            .usage(10, 5)
            .finish("tool_calls"),
            reply("Both ran."),
        )
        prompt = asyncio.create_task(live.prompt(sid, "run both"))
        first = await asked(events, "bash")
        await asked(events, "bash", start=events.frames.index(first) + 1)
        assert len((await live.client.get("/permission")).json()) == 2

        await reply_to(live, first, "always")
        result = (await asyncio.wait_for(prompt, 10)).json()
        assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Both ran."]
        messages = (await live.client.get(f"/session/{sid}/message")).json()
        outputs = [p["state"]["output"] for p in tool_parts(messages[1])]
        assert any("first" in o for o in outputs) and any("second" in o for o in outputs)
        replies = [f.properties["reply"] for f in events.of_type("permission.replied")]
        assert replies == ["always", "always"]

        # The approval is remembered for the session: the next matching call asks nobody.
        live.fake.enqueue(call("bash", bash("echo third")), reply("Third ran."))
        asked_before = len(events.of_type("permission.asked"))
        assert (await live.prompt(sid, "once more")).status_code == 200
        assert len(events.of_type("permission.asked")) == asked_before


async def test_an_unanswered_request_is_denied_at_its_deadline(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config: dict[str, Any] = {"permission": {"bash": "ask"}, "permission_timeout": 300}
    clock = FakeClock()  # the server's: the deadline passes when the test says so
    async with server(tmp_path, fake_openai, database_url, clock, **config) as (live, events):
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("bash", bash("echo never")))
        prompt = asyncio.create_task(live.prompt(sid, "run it"))
        request = await asked(events, "bash")
        assert request.properties["time"]["deadline"] - request.properties["time"]["created"] == 300_000
        await asyncio.wait_for(clock.sleeping(), 5)
        clock.advance(300)
        result = (await asyncio.wait_for(prompt, 10)).json()

        [tool] = tool_parts(result)
        assert tool["state"]["status"] == "error"
        assert "denied by default" in tool["state"]["error"]
        assert result["info"].get("error") is None
        assert len(live.fake.requests) == 1
        await events.wait_for(
            lambda f: f.type == "session.status" and f.properties["status"]["type"] == "idle"
        )
        assert (await live.client.get("/session/status")).json() == {}
        replied = await events.wait_for(lambda f: f.type == "permission.replied")
        assert replied.properties["decision"] == "timeout"
        row = await stored_request(database_url, request.properties["id"])
        assert (row["status"], row["decision"], row["decided_by"]) == ("expired", "timeout", "deadline")


async def test_a_tool_denied_outright_never_reaches_the_model(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"bash": "deny"}) as (live, _):
        sid = (await live.create_session())["id"]
        live.fake.enqueue(reply("No shell for me."))
        assert (await live.prompt(sid, "hi")).status_code == 200
        names = tool_names(live.fake.requests[0])
        assert "bash" not in names and "read" in names


async def test_a_session_rule_cannot_reopen_a_config_deny(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"bash": "deny"}) as (live, _):
        allow_bash = [{"permission": "bash", "pattern": "*", "action": "allow"}]
        sid = (await live.create_session(permission=allow_bash))["id"]
        live.fake.enqueue(reply("Still no shell."))
        assert (await live.prompt(sid, "hi", tools={"bash": True})).status_code == 200
        assert "bash" not in tool_names(live.fake.requests[0])


async def test_per_prompt_tools_map_switches_a_tool_off_for_that_turn_only(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(reply("no bash this time"), reply("bash is back"))
    assert (await live.prompt(sid, "first", tools={"bash": False})).status_code == 200
    assert (await live.prompt(sid, "second")).status_code == 200
    first, second = live.fake.requests
    assert "bash" not in tool_names(first) and "read" in tool_names(first)
    assert "bash" in tool_names(second)
    session = (await live.client.get(f"/session/{sid}")).json()
    assert session.get("permission") is None, "the prompt's map does not rewrite the session"


async def test_three_identical_calls_ask_doom_loop(live: LiveServer) -> None:
    events = EventCollector()
    await events.start(live.client)
    sid = (await live.create_session())["id"]
    (live.workspace / "a.txt").write_text("alpha\n")
    same = {"filePath": "a.txt"}
    live.fake.enqueue(call("read", same), call("read", same), call("read", same), reply("Stopped looping."))
    prompt = asyncio.create_task(live.prompt(sid, "read it again and again"))

    request = await asked(events, "doom_loop")
    assert request.properties["patterns"] == ["read"] and request.properties["always"] == ["read"]
    assert request.properties["metadata"] == {"tool": "read", "input": same}
    assert len(live.fake.requests) == 3
    await reply_to(live, request, "once")
    result = (await asyncio.wait_for(prompt, 10)).json()
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Stopped looping."]
    assert len(events.of_type("permission.asked")) == 1
    await events.stop()


async def test_reading_outside_the_workspace_asks_external_directory(live: LiveServer) -> None:
    events = EventCollector()
    await events.start(live.client)
    sid = (await live.create_session())["id"]
    expected = text_of("/etc/hostname").strip()
    live.fake.enqueue(call("read", {"filePath": "/etc/hostname"}), reply("Read it."))
    prompt = asyncio.create_task(live.prompt(sid, "what is the hostname?"))

    request = await asked(events, "external_directory")
    assert request.properties["patterns"] == ["/etc/*"]
    assert request.properties["metadata"]["filepath"] == "/etc/hostname"
    await reply_to(live, request, "once")
    await asyncio.wait_for(prompt, 10)
    messages = (await live.client.get(f"/session/{sid}/message")).json()
    [tool] = tool_parts(messages[1])
    assert tool["state"]["status"] == "completed"
    assert expected in tool["state"]["output"]
    await events.stop()


async def test_replies_to_unknown_requests_are_404(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    missing = await live.client.post("/permission/per_missing/reply", json={"reply": "once"})
    assert missing.status_code == 404 and missing.json()["name"] == "NotFoundError"
    legacy = await live.client.post(f"/session/{sid}/permissions/per_missing", json={"response": "once"})
    assert legacy.status_code == 404
    bad = await live.client.post("/permission/per_missing/reply", json={"reply": "sometimes"})
    assert bad.status_code == 400


async def test_the_deprecated_route_answers_too(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"bash": "ask"}) as (live, events):
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("bash", bash("echo legacy")), reply("Done."))
        prompt = asyncio.create_task(live.prompt(sid, "run"))
        request = await asked(events, "bash")
        other = (await live.create_session())["id"]
        wrong = await live.client.post(
            f"/session/{other}/permissions/{request.properties['id']}", json={"response": "once"}
        )
        assert wrong.status_code == 404
        right = await live.client.post(
            f"/session/{sid}/permissions/{request.properties['id']}", json={"response": "once"}
        )
        assert right.status_code == 200 and right.json() is True
        assert (await asyncio.wait_for(prompt, 10)).status_code == 200


async def test_abort_rejects_the_waiting_request(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with server(tmp_path, fake_openai, database_url, permission={"bash": "ask"}) as (live, events):
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("bash", bash("echo aborted")))
        prompt = asyncio.create_task(live.prompt(sid, "run"))
        request = await asked(events, "bash")
        await live.client.post(f"/session/{sid}/abort")
        result = (await asyncio.wait_for(prompt, 10)).json()
        [tool] = tool_parts(result)
        assert tool["state"]["status"] == "error"
        assert (await live.client.get("/permission")).json() == []
        await events.wait_for(lambda f: f.type == "permission.replied")
        row = await stored_request(database_url, request.properties["id"])
        assert (row["status"], row["decision"], row["decided_by"]) == ("denied", "reject", "abort")
