"""`agentforge permission|question` answer a live server's waiting requests from another terminal."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentforge.cli import exits
from tests.cli.conftest import Cli
from tests.cli.test_run_humans import QUESTION, tool_results
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import call, reply

WAIT_SECONDS = 15.0


async def pending(live: LiveServer, path: str) -> list[dict[str, Any]]:
    """Polls the server until something waits at `path` (/permission or /question)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while loop.time() < deadline:
        found: list[dict[str, Any]] = (await live.client.get(path)).json()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing waited at {path}")


async def turn_done(live: LiveServer, session_id: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while loop.time() < deadline:
        if session_id not in (await live.client.get("/session/status")).json():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the turn did not end")


async def start_turn(live: LiveServer, text: str) -> str:
    session_id = str((await live.create_session())["id"])
    body = {"parts": [{"type": "text", "text": text}]}
    response = await live.client.post(f"/session/{session_id}/prompt_async", json=body)
    assert response.status_code < 300, response.text
    return session_id


async def test_permission_list_and_reply(live: LiveServer, cli: Cli) -> None:
    (live.workspace / ".env").write_text("TOKEN=secret\n")
    live.fake.enqueue(call("read", {"filePath": ".env"}), reply("read it"))
    session_id = await start_turn(live, "read my .env")
    [request] = await pending(live, "/permission")

    listed = await cli.invoke("permission", "list", "--url", live.url)
    assert listed.exit_code == exits.OK, listed.output
    head, details = listed.stdout.splitlines()
    assert head.split() == [request["id"], "read", str(live.workspace / ".env")]
    assert details.startswith(f"    session {session_id} · deadline ")
    as_json = json.loads((await cli.invoke("permission", "list", "--url", live.url, "--json")).stdout)
    assert [item["id"] for item in as_json] == [request["id"]]

    answered = await cli.invoke("permission", "reply", request["id"], "once", "--url", live.url)
    assert answered.exit_code == exits.OK, answered.output
    assert answered.stdout == f"{request['id']}: once\n"
    await turn_done(live, session_id)
    assert "TOKEN=secret" in tool_results(live.fake.requests[1])[0]

    again = await cli.invoke("permission", "reply", request["id"], "once", "--url", live.url)
    assert again.exit_code == exits.ERROR
    assert "not found" in again.stderr
    bad = await cli.invoke("permission", "reply", request["id"], "sometimes", "--url", live.url)
    assert bad.exit_code == exits.USAGE
    message_without_reject = await cli.invoke(
        "permission", "reply", "per_1", "once", "-m", "hi", "--url", live.url
    )
    assert message_without_reject.exit_code == exits.USAGE


async def test_question_list_reply_and_reject(live: LiveServer, cli: Cli) -> None:
    live.fake.enqueue(call("question", QUESTION), reply("Postgres then"))
    session_id = await start_turn(live, "pick a database")
    [request] = await pending(live, "/question")

    listed = await cli.invoke("question", "list", "--url", live.url)
    assert listed.exit_code == exits.OK, listed.output
    assert f"{request['id']} (session {session_id})" in listed.stdout
    assert "    2) Postgres - a server" in listed.stdout.splitlines()

    too_many = await cli.invoke("question", "reply", request["id"], "1", "2", "--url", live.url)
    assert too_many.exit_code == exits.USAGE
    answered = await cli.invoke("question", "reply", request["id"], "2", "--url", live.url)
    assert answered.exit_code == exits.OK, answered.output
    await turn_done(live, session_id)
    assert '"Which database should I use?"="Postgres"' in tool_results(live.fake.requests[1])[0]

    live.fake.enqueue(call("question", QUESTION), reply("never reached"))
    other = await start_turn(live, "pick again")
    [second] = await pending(live, "/question")
    dismissed = await cli.invoke("question", "reject", second["id"], "--url", live.url)
    assert dismissed.exit_code == exits.OK, dismissed.output
    await turn_done(live, other)
    assert (await live.client.get("/question")).json() == []
    unknown = await cli.invoke("question", "reject", second["id"], "--url", live.url)
    assert unknown.exit_code == exits.ERROR
    assert "not found" in unknown.stderr


async def test_without_a_server_the_error_says_so(cli: Cli) -> None:
    result = await cli.invoke("permission", "list", "--url", "http://127.0.0.1:9")
    assert result.exit_code == exits.ERROR
    assert result.stderr.startswith("error: cannot reach the server")
    assert len(result.stderr.splitlines()) == 1
