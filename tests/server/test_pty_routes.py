"""Terminals through a live server: create one, drive its shell over the WebSocket, resize it, connect
again from a cursor or with a ticket, and see it exit and go away, with events and audit entries."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.e2e.harness import EventCollector, LiveServer
from tests.sandboxing import requires_sandbox
from tests.server_signals import server_ignoring

TIMEOUT = 10


def _json(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


class Screen:
    """What a WebSocket client of a terminal has received, and its position in the terminal's output
    counted the way opencode's client counts it: set by each cursor frame, advanced by each text."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.text = ""
        self.frames: list[str | int] = []  # texts, and the cursors announced, in order
        self.position = 0

    async def until(self, wanted: str) -> None:
        """Read until `wanted` has arrived (after what was read so far), within TIMEOUT seconds."""
        start = len(self.text)
        async with asyncio.timeout(TIMEOUT):
            while wanted not in self.text[start:]:
                await self.read()

    async def read(self) -> None:
        message = await self.socket.recv()
        if isinstance(message, bytes):
            assert message[0] == 0
            self.position = orjson.loads(message[1:])["cursor"]
            self.frames.append(self.position)
        else:
            self.text += message
            self.position += len(message)  # ASCII here: one code unit per character
            self.frames.append(message)


@contextlib.asynccontextmanager
async def terminal_socket(live: LiveServer, pty_id: str, query: str = "") -> AsyncIterator[Screen]:
    url = live.url.replace("http://", "ws://") + f"/pty/{pty_id}/connect" + (f"?{query}" if query else "")
    async with connect(url) as socket:
        yield Screen(socket)


async def refused(live: LiveServer, pty_id: str, query: str = "") -> None:
    """The socket is refused before it opens (the handshake answers 403)."""
    with pytest.raises(InvalidStatus) as refusal:
        async with terminal_socket(live, pty_id, query):
            pass
    assert refusal.value.response.status_code == 403


async def _shell(live: LiveServer, **body: Any) -> dict[str, Any]:
    info: dict[str, Any] = _json(await live.client.post("/pty", json=body))
    return info


async def test_a_shell_runs_in_the_workspace_and_answers_over_the_socket(live: LiveServer) -> None:
    events = EventCollector()
    await events.start(live.client)
    info = await _shell(live, title="build", command="/bin/bash", args=["--norc", "-i"])
    assert info["status"] == "running" and info["cwd"] == str(live.workspace) and info["title"] == "build"
    assert info["id"].startswith("pty_") and info["pid"] > 0
    assert _json(await live.client.get("/pty")) == [info]
    assert _json(await live.client.get(f"/pty/{info['id']}")) == info
    created = await events.wait_for(lambda f: f.type == "pty.created")
    assert created.properties["info"]["id"] == info["id"]

    async with terminal_socket(live, info["id"]) as screen:
        await screen.socket.send("echo $((6*7)) $TERM; pwd\n")
        await screen.until(f"42 xterm-256color\r\n{live.workspace}")
        resized = _json(await live.client.put(f"/pty/{info['id']}", json={"size": {"rows": 33, "cols": 101}}))
        assert resized["id"] == info["id"]
        await screen.socket.send("stty size\n")
        await screen.until("33 101")
        # What the shell printed before the client came (its prompt) came first, then the cursor.
        assert any(isinstance(frame, int) for frame in screen.frames)
        seen = screen.position

    # Connecting again from that position sends only what came after it, then the new position.
    async with terminal_socket(live, info["id"], f"cursor={seen}") as later:
        while not later.frames or not isinstance(later.frames[-1], int):
            await later.read()
        assert "42" not in later.text and later.position >= seen
        await later.socket.send("echo later-$((1+1))\n")
        await later.until("later-2")
    # From the start, it sends everything the terminal kept.
    async with terminal_socket(live, info["id"], "cursor=0") as again:
        await again.until("later-2")
        assert "42 xterm-256color" in again.text and "33 101" in again.text
        await again.socket.send("exit 3\n")
        with contextlib.suppress(ConnectionClosed):
            async with asyncio.timeout(TIMEOUT):
                while True:
                    await again.socket.recv()
        assert again.socket.close_code == 1000

    exited = await events.wait_for(lambda f: f.type == "pty.exited")
    assert exited.properties == {"id": info["id"], "exitCode": 3}
    assert _json(await live.client.get(f"/pty/{info['id']}"))["status"] == "exited"
    assert _json(await live.client.delete(f"/pty/{info['id']}")) is True
    await events.wait_for(lambda f: f.type == "pty.deleted" and f.properties["id"] == info["id"])
    missing = await live.client.get(f"/pty/{info['id']}")
    assert (
        missing.status_code == 404
        and missing.json()["data"]["message"] == f"Terminal not found: {info['id']}"
    )
    await events.stop()
    actions = [entry["action"] for entry in _json(await live.client.get("/audit"))["entries"]]
    assert "pty.created" in actions and "pty.removed" in actions


async def test_a_ticket_opens_the_socket_once(live: LiveServer) -> None:
    info = await _shell(live, command="/bin/sh")
    other = await _shell(live, command="/bin/sh")
    ticket = _json(await live.client.post(f"/pty/{info['id']}/connect-token"))
    assert ticket["expires_in"] == 60 and len(ticket["ticket"]) >= 32
    async with terminal_socket(live, info["id"], f"ticket={ticket['ticket']}") as screen:
        await screen.socket.send("echo ticket-ok\n")
        await screen.until("ticket-ok\r\n")
    await refused(live, info["id"], f"ticket={ticket['ticket']}")  # used once already
    foreign = _json(await live.client.post(f"/pty/{other['id']}/connect-token"))
    await refused(live, info["id"], f"ticket={foreign['ticket']}")  # another terminal's
    await refused(live, info["id"], "ticket=made-up")
    await refused(live, "pty_nope")


async def test_a_command_and_cwd_inside_the_workspace(live: LiveServer) -> None:
    (live.workspace / "sub").mkdir()
    info = await _shell(
        live,
        command="/bin/sh",
        args=["-c", "pwd; echo $GREETING; read line"],
        cwd="sub",
        env={"GREETING": "hi there"},
    )
    assert info["command"] == "/bin/sh" and info["cwd"] == str(live.workspace / "sub")
    async with terminal_socket(live, info["id"]) as screen:
        await screen.until(f"{live.workspace / 'sub'}\r\nhi there")
    outside = await live.client.post("/pty", json={"cwd": str(live.workspace.parent)})
    assert outside.status_code == 403
    bad_env = await live.client.post("/pty", json={"env": {"NOT VALID": "x"}})
    assert bad_env.status_code == 400
    assert (await live.client.put("/pty/pty_nope", json={"title": "x"})).status_code == 404


async def test_shells_lists_the_servers_shells(live: LiveServer) -> None:
    shells = _json(await live.client.get("/pty/shells"))
    names = {shell["name"] for shell in shells if shell["acceptable"]}
    assert "bash" in names or "sh" in names


async def test_a_key_typed_over_the_socket_signals_the_job_however_the_server_was_started(
    live: LiveServer,
) -> None:
    """^\\ sent over the socket ends the terminal's foreground job with SIGQUIT, also when the server
    ignores SIGQUIT (a script's `agentforge serve &` starts it so), which its child would inherit."""
    events = EventCollector()
    await events.start(live.client)
    with server_ignoring(signal.SIGQUIT):
        script = "exec 3</dev/tty && echo ready && exec sleep 30"  # /dev/tty: its controlling terminal
        info = await _shell(live, command="/bin/sh", args=["-c", script])
        async with terminal_socket(live, info["id"]) as screen:
            await screen.until("ready")
            await screen.socket.send("\x1c")
            exited = await events.wait_for(
                lambda f: f.type == "pty.exited" and f.properties["id"] == info["id"], timeout=TIMEOUT
            )
    assert exited.properties["exitCode"] == 128 + signal.SIGQUIT
    await events.stop()


@requires_sandbox
async def test_ctrl_c_reaches_a_sandboxed_program_that_handles_it(
    live: LiveServer,
) -> None:
    """The local user's terminal runs in the sandbox (`sandbox.mode` auto, the kernel allowing it). A
    program there that traps SIGINT and does no job control gets ^C sent over the socket and ends as
    it chooses; bwrap, in the same foreground group, no longer dies of it with the whole sandbox."""
    events = EventCollector()
    await events.start(live.client)
    # Its first process is bwrap's (the sandbox's pid 1): the fix is under test, not a bare shell.
    script = "trap 'echo caught; exit 5' INT; echo in-$(cat /proc/1/comm); while :; do sleep 0.05; done"
    info = await _shell(live, command="/bin/sh", args=["-c", script])
    async with terminal_socket(live, info["id"]) as screen:
        await screen.until("in-bwrap")
        await screen.socket.send("\x03")
        await screen.until("caught")
        exited = await events.wait_for(
            lambda f: f.type == "pty.exited" and f.properties["id"] == info["id"], timeout=TIMEOUT
        )
    assert exited.properties["exitCode"] == 5
    await events.stop()
