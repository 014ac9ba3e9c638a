"""Write-ahead for tool calls (session/tool_calls.py `_recorded`): when the store refuses a call's
`running` state, a tool with effects never runs and the call is stored as an error saying why; a
tool that only reads (`Tool.has_effects` False) runs without waiting for that write, so its call
stands. The refusal is a real database fault: a trigger on the `part` table rejects that one write,
on SQLite and Postgres."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from agentforge.store import parse_database_url
from tests.databases import owner_url_for
from tests.e2e.harness import EventCollector, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply

SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER refuse_running_{when} BEFORE {when} ON part
    WHEN json_extract(NEW.data, '$.state.status') = 'running'
    BEGIN SELECT RAISE(ABORT, 'injected: running refused'); END"""
    for when in ("INSERT", "UPDATE")
]
POSTGRES_TRIGGER = [
    """CREATE FUNCTION refuse_running() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF (NEW.data::json -> 'state' ->> 'status') = 'running' THEN
            RAISE EXCEPTION 'injected: running refused';
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER refuse_running BEFORE INSERT OR UPDATE ON part
    FOR EACH ROW EXECUTE FUNCTION refuse_running()""",
]


async def _refuse_running_states(database_url: str) -> None:
    """Install the fault as the schema's owner (the server's runtime role may not create triggers)."""
    target = parse_database_url(owner_url_for(database_url) or database_url)
    if target.dialect == "sqlite":
        await asyncio.to_thread(_sqlite_triggers, target.sqlite_path)
        return
    engine = create_async_engine(target.url)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(f'SET LOCAL search_path TO "{target.schema}"')
            for statement in POSTGRES_TRIGGER:
                await conn.exec_driver_sql(statement)
    finally:
        await engine.dispose()


def _sqlite_triggers(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for statement in SQLITE_TRIGGERS:
            conn.execute(statement)


async def test_a_call_whose_start_cannot_be_stored_fails_without_running(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {**fake_provider_config(fake_openai), "permission": {"bash": "allow"}}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        await _refuse_running_states(database_url)
        marker = live.workspace / "ran.txt"
        sid = (await live.create_session())["id"]
        live.fake.enqueue(
            call("bash", {"command": f"touch {marker}", "description": "Leave a mark"}),
            reply("It did not run."),
        )

        response = await live.prompt(sid, "leave a mark")

        assert response.status_code == 200, response.text
        history = (await live.client.get(f"/session/{sid}/message")).json()
        (tool,) = [p for m in history for p in m["parts"] if p["type"] == "tool"]
        assert tool["state"]["status"] == "error"
        assert tool["state"]["error"].startswith("the call was not run: its start could not be stored")
        assert not marker.exists(), "the tool ran although its start was not stored"
        # The model was told, and the turn went on to its answer.
        assert len(live.fake.requests) == 2


async def _read_with_its_start_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, config: dict[str, Any]
) -> tuple[dict[str, Any], list[Any]]:
    """A `read` call whose `running` state the store refuses: its stored part, and the states the
    part's events showed over SSE."""
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        await _refuse_running_states(database_url)
        (live.workspace / "notes.txt").write_text("read without waiting\n")
        sid = (await live.create_session())["id"]
        events = EventCollector()
        await events.start(live.client, f"/event?sessionID={sid}")
        live.fake.enqueue(call("read", {"filePath": "notes.txt"}), reply("Read it."))

        response = await live.prompt(sid, "read the notes")

        assert response.status_code == 200, response.text
        await events.wait_for(lambda f: f.type == "session.idle")
        await events.stop()
        history = (await live.client.get(f"/session/{sid}/message")).json()
        (tool,) = [p for m in history for p in m["parts"] if p["type"] == "tool"]
        shown = [
            f.properties["part"]["state"]["status"]
            for f in events.of_type("message.part.updated")
            if f.properties["part"]["type"] == "tool"
        ]
        return tool, shown


async def test_a_call_that_only_reads_runs_without_waiting_for_its_start(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    """Its start is not written ahead of it: refused here (never shown), the read still ran and its
    output is the call's stored result (with write-ahead it would have failed unrun, as the bash
    call above)."""
    config = fake_provider_config(fake_openai)
    tool, shown = await _read_with_its_start_refused(tmp_path, fake_openai, database_url, config)
    assert "running" not in shown and shown[-1] == "completed"
    assert tool["state"]["status"] == "completed", tool["state"]
    assert "read without waiting" in tool["state"]["output"]
    # The model got the file's text with the result.
    assert "read without waiting" in str(fake_openai.requests[1]["messages"])


HOOKED_PLUGIN = textwrap.dedent(
    """
    from agentforge.plugins import hookimpl


    @hookimpl
    async def tool_execute_before(tool, output):
        pass  # a plugin's code around a call: it may have effects of its own
    """
)


async def test_a_plugin_around_calls_keeps_every_call_written_ahead(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    """With a plugin hook around tool calls, a read waits for its start too: refused, it is not run."""
    plugin_file = tmp_path / "hooked_plugin.py"
    plugin_file.write_text(HOOKED_PLUGIN)
    config = {**fake_provider_config(fake_openai), "plugin": [str(plugin_file)]}
    tool, _shown = await _read_with_its_start_refused(tmp_path, fake_openai, database_url, config)
    assert tool["state"]["status"] == "error"
    assert tool["state"]["error"].startswith("the call was not run: its start could not be stored")
