"""Tools die with the server (issue 11, item 4): after kill -9 of a server subprocess in the middle
of a bash command, nothing the command started survives the restart (its leader dies with the
server, what it left in the background is killed at start-up through the command ledger), so its
side effect never lands, and the history says the call was aborted."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx2

from agentforge.clock import SYSTEM_CLOCK
from tests.e2e.harness import fake_provider_config
from tests.e2e.server_process import serve_process
from tests.fakes.openai_server import FakeOpenAI, call, reply

DEADLINE_SECONDS = 30


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


async def until(predicate_name: str, check: object) -> None:
    deadline = SYSTEM_CLOCK.time() + DEADLINE_SECONDS
    while not check():  # type: ignore[operator]
        assert SYSTEM_CLOCK.time() < deadline, f"timed out waiting for {predicate_name}"
        await asyncio.sleep(0.05)


async def test_a_command_running_when_the_server_is_killed_never_completes(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    started, marker, background = workspace / "started", workspace / "marker", workspace / "background"
    # The leader sleeps then writes; a background subshell outlives the leader unless killed.
    command = f"touch {started}; (sleep 3; touch {background}) & sleep 3; touch {marker}"
    config = {**fake_provider_config(fake_openai), "sandbox": {"mode": "off"}}
    fake_openai.enqueue(call("bash", {"command": command, "description": "Slow write"}))

    async with (
        serve_process(tmp_path, config, database_url=database_url, workspace=workspace) as server,
        httpx2.AsyncClient(base_url=server.url, timeout=30) as client,
    ):
        sid = (await client.post("/session")).json()["id"]
        body = {"parts": [{"type": "text", "text": "go"}]}
        prompt = asyncio.create_task(client.post(f"/session/{sid}/message", json=body))
        await until("the command to start", started.exists)
        server.kill()
        with contextlib.suppress(httpx2.HTTPError):
            await prompt
        await server.process.wait()

    fake_openai.enqueue(reply("unused"))
    async with serve_process(tmp_path, config, database_url=database_url, workspace=workspace) as server:
        # Start-up killed what the dead run left: no process of the command is left to write.
        await until("the command's processes to be gone", lambda: not processes_naming(str(marker)))
        async with httpx2.AsyncClient(base_url=server.url, timeout=30) as client:
            history = (await client.get(f"/session/{sid}/message")).json()

    assert not marker.exists() and not background.exists()
    assert list((tmp_path / "data" / "commands").iterdir()) == []
    [_, assistant] = history
    [tool] = [part for part in assistant["parts"] if part["type"] == "tool"]
    assert tool["state"]["status"] == "error"
    assert assistant["info"]["error"]["name"] == "MessageAbortedError"
