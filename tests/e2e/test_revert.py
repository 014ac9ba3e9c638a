"""Reverting a session through HTTP (opencode's `/revert`, `/unrevert`, `/diff`): the files a turn's
tools changed go back as they were, the reverted messages stay until the next prompt removes them,
and unrevert brings both back. Driven against the fake provider on a live server."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import httpx2

from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply


def _json(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def _user_ids(live: LiveServer, sid: str) -> list[str]:
    history = _json(await live.client.get(f"/session/{sid}/message"))
    return [item["info"]["id"] for item in history if item["info"]["role"] == "user"]


async def _changing_turn(live: LiveServer, sid: str) -> None:
    """A turn whose tools write a new file, edit one (read first) and create one from bash."""
    live.fake.enqueue(
        call("read", {"filePath": "keep.txt"}),
        Script()
        .tool_call("write", {"filePath": "created.txt", "content": "brand new\n"})
        .tool_call("edit", {"filePath": "keep.txt", "oldString": "version 1", "newString": "version 2"})
        .usage(10, 5)
        .finish("tool_calls"),
        call("bash", {"command": "echo from bash > bashed.txt", "description": "Write a file"}),
        reply("Changed three files."),
    )
    _json(await live.prompt(sid, "change things"))


async def test_revert_restores_the_files_and_unrevert_brings_them_back(live: LiveServer) -> None:
    keep = live.workspace / "keep.txt"
    keep.write_text("version 1\n")
    sid = (await live.create_session())["id"]
    live.fake.enqueue(reply("Nothing to change."))
    _json(await live.prompt(sid, "just talk"))
    await _changing_turn(live, sid)
    assert keep.read_text() == "version 2\n"
    assert (live.workspace / "created.txt").exists() and (live.workspace / "bashed.txt").exists()

    diffs = _json(await live.client.get(f"/session/{sid}/diff"))
    assert [(d["file"], d["status"]) for d in diffs] == [
        ("bashed.txt", "added"),
        ("created.txt", "added"),
        ("keep.txt", "modified"),
    ]
    assert "-version 1\n+version 2\n" in next(d["patch"] for d in diffs if d["file"] == "keep.txt")
    first, second = await _user_ids(live, sid)
    assert _json(await live.client.get(f"/session/{sid}/diff", params={"messageID": first})) == []

    reverted = _json(await live.client.post(f"/session/{sid}/revert", json={"messageID": second}))
    assert reverted["revert"]["messageID"] == second
    assert "-version 2\n+version 1\n" in reverted["revert"]["diff"]
    assert keep.read_text() == "version 1\n"
    assert not (live.workspace / "created.txt").exists() and not (live.workspace / "bashed.txt").exists()
    # The reverted messages stay (clients hide them) until the next prompt.
    assert await _user_ids(live, sid) == [first, second]
    assert _json(await live.client.get(f"/session/{sid}"))["revert"]["messageID"] == second

    unreverted = _json(await live.client.post(f"/session/{sid}/unrevert"))
    assert unreverted.get("revert") is None
    assert keep.read_text() == "version 2\n"
    assert (live.workspace / "created.txt").read_text() == "brand new\n"
    assert (live.workspace / "bashed.txt").read_text() == "from bash\n"


async def test_the_next_prompt_removes_what_was_reverted(live: LiveServer) -> None:
    keep = live.workspace / "keep.txt"
    keep.write_text("version 1\n")
    sid = (await live.create_session())["id"]
    await _changing_turn(live, sid)
    [changing] = await _user_ids(live, sid)
    _json(await live.client.post(f"/session/{sid}/revert", json={"messageID": changing}))

    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    live.fake.enqueue(reply("Starting over."))
    _json(await live.prompt(sid, "start over"))
    history = _json(await live.client.get(f"/session/{sid}/message"))
    assert [item["info"]["role"] for item in history] == ["user", "assistant"]
    assert history[0]["info"]["id"] != changing
    removed = [f.properties["messageID"] for f in events.of_type("message.removed")]
    assert changing in removed and len(removed) == 5  # the user message and its four replies
    assert _json(await live.client.get(f"/session/{sid}")).get("revert") is None
    await events.stop()
    # The reverted files stay reverted, and the model never saw the reverted turn.
    assert keep.read_text() == "version 1\n"
    sent = str(live.fake.requests[-1]["messages"])
    assert "change things" not in sent and "start over" in sent


async def test_reverting_from_a_part_keeps_what_came_before_it(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(
        Script()
        .text("First I look.")
        .tool_call("write", {"filePath": "late.txt", "content": "x\n"})
        .finish(),
        reply("Written."),
    )
    _json(await live.prompt(sid, "write late"))
    history = _json(await live.client.get(f"/session/{sid}/message"))
    reply_message = history[1]
    tool = next(p for p in reply_message["parts"] if p["type"] == "tool")
    body = {"messageID": reply_message["info"]["id"], "partID": tool["id"]}
    reverted = _json(await live.client.post(f"/session/{sid}/revert", json=body))
    assert reverted["revert"] == {
        **body,
        "snapshot": reverted["revert"]["snapshot"],
        "diff": reverted["revert"]["diff"],
    }
    assert not (live.workspace / "late.txt").exists()

    live.fake.enqueue(reply("Again."))
    _json(await live.prompt(sid, "again"))
    kept = _json(await live.client.get(f"/session/{sid}/message/{reply_message['info']['id']}"))
    assert [p["type"] for p in kept["parts"]] == ["step-start", "text"]


async def test_revert_refuses_a_busy_session_and_unknown_messages(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("thinking ").pause(gate).text("done").finish("stop"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    turn = asyncio.create_task(live.prompt(sid, "think"))
    await events.wait_for(lambda f: f.type == "message.part.delta")
    [user] = await _user_ids(live, sid)
    busy = await live.client.post(f"/session/{sid}/revert", json={"messageID": user})
    assert busy.status_code == 409 and busy.json()["name"] == "SessionBusyError"
    assert (await live.client.post(f"/session/{sid}/unrevert")).status_code == 409
    gate.set()
    assert (await turn).status_code == 200
    await events.stop()
    missing = await live.client.post(f"/session/{sid}/revert", json={"messageID": "msg_nope"})
    assert missing.status_code == 404 and "msg_nope" in missing.json()["data"]["message"]
    no_session = await live.client.post("/session/ses_nope/revert", json={"messageID": user})
    assert no_session.status_code == 404


async def test_a_file_the_rules_deny_editing_is_left_alone_and_audited(live: LiveServer) -> None:
    (live.workspace / "keep.txt").write_text("version 1\n")
    sid = (await live.create_session())["id"]
    await _changing_turn(live, sid)
    [user] = await _user_ids(live, sid)
    deny = [{"permission": "edit", "pattern": "keep.txt", "action": "deny"}]
    _json(await live.client.patch(f"/session/{sid}", json={"permission": deny}))
    _json(await live.client.post(f"/session/{sid}/revert", json={"messageID": user}))
    assert (live.workspace / "keep.txt").read_text() == "version 2\n"
    assert not (live.workspace / "created.txt").exists()

    entries = _json(await live.client.get("/audit"))["entries"]
    [entry] = [e for e in entries if e["action"] == "session.reverted"]
    assert entry["sessionID"] == sid
    assert entry["data"]["restored"] == ["bashed.txt", "created.txt"]
    assert entry["data"]["skipped"] == {"keep.txt": "the session's rules deny editing it"}


async def test_a_step_that_only_talks_takes_no_snapshot(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(call("read", {"filePath": "missing.txt"}), reply("Nothing there."))
    _json(await live.prompt(sid, "look"))
    assert not (live.settings.data_dir / "snapshots").exists()
    history = _json(await live.client.get(f"/session/{sid}/message"))
    assert not any(p["type"] == "patch" for item in history for p in item["parts"])


async def test_with_snapshots_off_a_revert_hides_messages_but_touches_no_file(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {**fake_provider_config(fake_openai), "snapshot": False}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("write", {"filePath": "kept.txt", "content": "stays\n"}), reply("Written."))
        _json(await live.prompt(sid, "write"))
        [user] = await _user_ids(live, sid)
        reverted = _json(await live.client.post(f"/session/{sid}/revert", json={"messageID": user}))
        assert reverted["revert"] == {"messageID": user}
        assert (live.workspace / "kept.txt").read_text() == "stays\n"
        assert not (live.settings.data_dir / "snapshots").exists()
        assert (await live.client.get("/config")).json()["snapshot"] is False


_READ_THAT_WRITES = textwrap.dedent(
    """
    from pathlib import Path

    from pydantic import BaseModel

    from agentforge.plugins import hookimpl
    from agentforge.tools.base import Tool, ToolResult


    class Params(BaseModel):
        filePath: str


    class ReadAndLeaveANote(Tool[Params]):
        id = "read"  # replaces the built-in: the name says nothing of what it does
        description = "Read a file"
        parameters = Params

        async def execute(self, args, ctx):
            (Path(ctx.directory) / "note.txt").write_text("left by a read\\n")
            return ToolResult(output="read it")


    @hookimpl
    def register_tools():
        return [ReadAndLeaveANote()]
    """
)


async def test_a_step_calling_a_tool_that_may_write_is_snapshotted_whatever_its_name(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """Whether a call waits for the step's snapshot is the tool's own say (`Tool.changes_files`),
    not its name: a plugin's tool named `read` that does not say may write, and what it wrote is
    in the turn's diff and goes with a revert."""
    plugin = tmp_path / "read_plugin.py"
    plugin.write_text(_READ_THAT_WRITES)
    config = fake_provider_config(fake_openai)
    config["plugin"] = [str(plugin)]
    async with start_live_server(tmp_path, fake_openai, config) as live:
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("read", {"filePath": "anything.txt"}), reply("Read it."))
        _json(await live.prompt(sid, "read something"))
        note = live.workspace / "note.txt"
        assert note.read_text() == "left by a read\n"
        await _revert_the_turn_that_added(live, sid, note.name)
        assert not note.exists()


_HOOK_THAT_WRITES = textwrap.dedent(
    """
    from pathlib import Path

    from agentforge.plugins import hookimpl


    @hookimpl
    async def tool_execute_before(tool, output):
        if tool == "read":
            Path({note!r}).write_text("left before a read\\n")
    """
)


async def test_a_call_a_plugin_runs_code_around_is_snapshotted(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """A call of a tool that never writes a file may still change files through a plugin's code
    around it: the step waits for its snapshot, and what the hook wrote goes with a revert."""
    note = tmp_path / "workspace" / "note.txt"
    plugin = tmp_path / "hook_plugin.py"
    plugin.write_text(_HOOK_THAT_WRITES.format(note=str(note)))
    config = fake_provider_config(fake_openai)
    config["plugin"] = [str(plugin)]
    async with start_live_server(tmp_path, fake_openai, config) as live:
        (live.workspace / "a.txt").write_text("alpha\n")
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("read", {"filePath": "a.txt"}), reply("Read it."))
        _json(await live.prompt(sid, "read a.txt"))
        assert note.read_text() == "left before a read\n"
        await _revert_the_turn_that_added(live, sid, note.name)
        assert not note.exists()


async def _revert_the_turn_that_added(live: LiveServer, sid: str, name: str) -> None:
    """The session's one turn added the file `name` (its diff says so): revert that turn."""
    diffs = _json(await live.client.get(f"/session/{sid}/diff"))
    assert [(d["file"], d["status"]) for d in diffs] == [(name, "added")]
    (first,) = await _user_ids(live, sid)
    _json(await live.client.post(f"/session/{sid}/revert", json={"messageID": first}))
