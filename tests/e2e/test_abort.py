"""Abort mid-stream and mid-tool: parts closed, tool interrupted, process killed, session usable."""

from __future__ import annotations

import asyncio
import os
import secrets

from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script, call, reply


async def test_abort_mid_stream_closes_parts_and_session_recovers(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("partial answer ").pause(gate).text("never sent").finish("stop"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    prompt = asyncio.create_task(live.prompt(sid, "talk"))
    await events.wait_for(lambda f: f.type == "message.part.delta")
    abort = await live.client.post(f"/session/{sid}/abort")
    assert abort.status_code == 200 and abort.json() is True
    result = (await prompt).json()
    gate.set()

    assert result["info"]["error"]["name"] == "MessageAbortedError"
    assert result["info"]["time"]["completed"] is not None
    text = next(p for p in result["parts"] if p["type"] == "text")
    assert text["text"] == "partial answer " and text["time"]["end"] is not None
    await events.wait_for(lambda f: f.type == "session.status" and f.properties["status"]["type"] == "idle")
    assert (await live.client.get("/session/status")).json() == {}
    await events.stop()

    live.fake.enqueue(reply("back again"))
    after = await live.prompt(sid, "still there?")
    assert after.status_code == 200
    assert [p["text"] for p in after.json()["parts"] if p["type"] == "text"] == ["back again"]


def _running(marker: bytes) -> bool:
    """Whether a live process has `marker` in its command line. The command runs in the sandbox's
    PID namespace, where the pid it sees of its child means nothing out here: we look it up by
    what it runs. A killed child may linger as a zombie until reaped; that counts as gone."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker not in cmdline.read():
                    continue
            with open(f"/proc/{entry}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                    return True
        except OSError:
            continue  # gone meanwhile
    return False


async def test_abort_mid_tool_kills_the_command(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    started = live.workspace / "sleep.started"
    seconds = f"30.{secrets.randbelow(10**6):06d}"  # marks this test's sleep among the host's processes
    marker = f"sleep\0{seconds}".encode()
    live.fake.enqueue(
        call(
            "bash", {"command": f"sleep {seconds} & echo x > {started}; wait", "description": "Sleep a while"}
        )
    )
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    prompt = asyncio.create_task(live.prompt(sid, "sleep"))
    await events.wait_for(
        lambda f: (
            f.type == "message.part.updated"
            and f.properties["part"]["type"] == "tool"
            and f.properties["part"]["state"]["status"] == "running"
        )
    )
    for _ in range(200):
        if started.exists() and await asyncio.to_thread(_running, marker):
            break
        await asyncio.sleep(0.01)
    assert await asyncio.to_thread(_running, marker), "the sleep never started"
    await live.client.post(f"/session/{sid}/abort")
    result = (await asyncio.wait_for(prompt, 10)).json()

    tool = next(p for p in result["parts"] if p["type"] == "tool")
    assert tool["state"]["status"] == "error"
    assert tool["state"]["metadata"]["interrupted"] is True
    assert result["info"]["error"]["name"] == "MessageAbortedError"
    for _ in range(100):
        if not await asyncio.to_thread(_running, marker):
            break
        await asyncio.sleep(0.02)
    assert not await asyncio.to_thread(_running, marker), "the sleep was not killed"
    await events.stop()

    live.fake.enqueue(reply("done"))
    assert (await live.prompt(sid, "next")).status_code == 200
