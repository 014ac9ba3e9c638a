"""`agentforge session list|show`, in-process and over HTTP."""

from __future__ import annotations

import json

from tests.cli.conftest import Cli
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import FakeOpenAI, call, reply


async def test_list_without_sessions(cli: Cli) -> None:
    result = await cli.run_local("session", "list")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no sessions\n"


async def test_list_shows_sessions_newest_first(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("one"), reply("two"))
    await cli.run_local("run", "first")
    await cli.run_local("run", "second")

    listed = json.loads((await cli.run_local("session", "list", "--json")).stdout)
    assert len(listed) == 2
    assert listed[0]["time"]["updated"] >= listed[1]["time"]["updated"]

    table = await cli.run_local("session", "list")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "TITLE", "UPDATED"]
    ids_in_order = [line.split()[0] for line in lines[1:] if line.startswith("ses_")]
    assert ids_in_order == [session["id"] for session in listed]

    limited = json.loads((await cli.run_local("session", "list", "--json", "--limit", "1")).stdout)
    assert [s["id"] for s in limited] == [listed[0]["id"]]


async def test_show_renders_messages_and_parts(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / "todo.txt").write_text("water the plants\n")
    fake_openai.enqueue(call("read", {"filePath": "todo.txt"}), reply("You need to water the plants."))
    await cli.run_local("run", "What is on my list?")
    session_id = json.loads((await cli.run_local("session", "list", "--json")).stdout)[0]["id"]

    shown = await cli.run_local("session", "show", session_id)
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert session_id in text
    assert text.index("── user") < text.index("What is on my list?") < text.index("── assistant · fake/m")
    assert "[tool] read filePath=todo.txt" in text
    assert "[ok]   read: todo.txt" in text
    assert "water the plants" in text
    assert text.rstrip().endswith("You need to water the plants.")

    as_json = json.loads((await cli.run_local("session", "show", session_id, "--json")).stdout)
    assert as_json["session"]["id"] == session_id
    roles = [message["info"]["role"] for message in as_json["messages"]]
    assert roles == ["user", "assistant", "assistant"]


async def test_show_unknown_session_exits_1(cli: Cli) -> None:
    result = await cli.run_local("session", "show", "ses_missing")
    assert result.exit_code == 1
    assert "NotFoundError" in result.stderr


async def test_list_and_show_over_http(live: LiveServer, cli: Cli) -> None:
    created = await live.create_session(title="remote one")
    listed = await cli.invoke("session", "list", "--url", live.url)
    assert listed.exit_code == 0, listed.output
    assert created["id"] in listed.stdout and "remote one" in listed.stdout
    shown = await cli.invoke("session", "show", created["id"], "--url", live.url)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("remote one\n")


async def test_rename_fork_export_and_delete(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / "todo.txt").write_text("water the plants\n")
    fake_openai.enqueue(call("read", {"filePath": "todo.txt"}), reply("You need to **water** the plants."))
    await cli.run_local("run", "What is on my list?")
    session_id = json.loads((await cli.run_local("session", "list", "--json")).stdout)[0]["id"]

    renamed = await cli.run_local("session", "rename", session_id, "Garden chores")
    assert renamed.exit_code == 0, renamed.output
    assert renamed.stdout == f"{session_id}: Garden chores\n"

    exported = json.loads((await cli.run_local("session", "export", session_id)).stdout)
    assert exported["session"]["title"] == "Garden chores"
    assert [m["info"]["role"] for m in exported["messages"]] == ["user", "assistant", "assistant"]

    markdown_file = cli.workspace / "chores.md"
    written = await cli.run_local(
        "session", "export", session_id, "--format", "markdown", "-o", str(markdown_file)
    )
    assert written.exit_code == 0, written.output
    markdown = markdown_file.read_text()
    assert markdown.startswith("# Garden chores\n")
    assert (
        markdown.index("## User")
        < markdown.index("What is on my list?")
        < markdown.index("## Assistant (fake/m)")
    )
    assert "**Tool `read`** filePath=todo.txt" in markdown
    assert "water the plants" in markdown
    assert markdown.rstrip().endswith("You need to **water** the plants.")

    forked = await cli.run_local("session", "fork", session_id)
    assert forked.exit_code == 0, forked.output
    fork_id = forked.stdout.strip()
    assert fork_id.startswith("ses_") and fork_id != session_id
    copy = json.loads((await cli.run_local("session", "export", fork_id)).stdout)
    assert len(copy["messages"]) == 3

    deleted = await cli.run_local("session", "delete", session_id)
    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout == f"deleted {session_id}\n"
    remaining = [s["id"] for s in json.loads((await cli.run_local("session", "list", "--json")).stdout)]
    assert remaining == [fork_id]
    gone = await cli.run_local("session", "export", session_id)
    assert gone.exit_code == 1
    assert "NotFoundError" in gone.stderr
