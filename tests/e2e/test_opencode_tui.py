"""opencode's own terminal UI (`opencode attach URL`, the version pinned in tests/opencode) against a
live Agent Forge server and the fake provider, in a real pseudo-terminal (tmux renders the screen):
it starts, a typed prompt runs a turn whose reply appears on screen, a tool that asks is approved from
the UI, and /undo reverts the turn's file.

Needs the pinned binary (`npm ci` in tests/opencode, which `.ci/run` does) and tmux; skipped, saying
which is missing, without them. Every wait polls the rendered screen for what must appear, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

PINNED = Path(__file__).resolve().parents[1] / "opencode"
OPENCODE = PINNED / "node_modules" / "opencode-linux-x64" / "bin" / "opencode"
SCREEN_TIMEOUT = 60.0  # seconds for the screen to show what a step waits for
POLL = 0.05
QUARTERS = [{"label": "Q1", "description": "early"}, {"label": "Q2", "description": "later"}]


pytestmark = [
    pytest.mark.skipif(not OPENCODE.is_file(), reason=f"run `npm ci` in {PINNED} for the pinned opencode"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {err.decode(errors='replace')}")
    return out.decode(errors="replace")


class Terminal:
    """The TUI running in its own tmux server, read as text and typed into."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.target = "tui"

    def _tmux(self, *args: str) -> list[str]:
        return ["tmux", "-L", self.socket, "-f", "/dev/null", *args]

    async def start(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        settings = [f"{key}={value}" for key, value in env.items()]
        await _run(
            *self._tmux("new-session", "-d", "-s", self.target, "-x", "160", "-y", "48", "-c", str(cwd)),
            "env",
            *settings,
            *command,
        )

    async def screen(self) -> str:
        return await _run(*self._tmux("capture-pane", "-p", "-t", self.target))

    async def type(self, text: str) -> None:
        await _run(*self._tmux("send-keys", "-t", self.target, "-l", text))

    async def press(self, key: str) -> None:
        await _run(*self._tmux("send-keys", "-t", self.target, key))

    async def until(self, seen: Callable[[str], bool], what: str) -> str:
        """Poll the screen until `seen` holds for it (at most SCREEN_TIMEOUT seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SCREEN_TIMEOUT
        while True:
            screen = await self.screen()
            if seen(screen):
                return screen
            if loop.time() > deadline:
                raise AssertionError(f"the screen never showed {what}:\n{screen}")
            await asyncio.sleep(POLL)

    async def shows(self, text: str) -> str:
        return await self.until(lambda screen: text in screen, repr(text))

    async def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            await _run(*self._tmux("kill-server"))


@contextlib.asynccontextmanager
async def opencode_attached(
    live: LiveServer, home: Path, *options: str, cwd: Path | None = None
) -> AsyncIterator[Terminal]:
    """`opencode attach` to the live server, in the workspace (or `cwd`), with its own home and XDG
    directories (nothing of the user's opencode setup is read or written)."""
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_STATE_HOME": str(home / "state"),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""),
    }
    terminal = Terminal(f"agentforge-tui-{uuid.uuid4().hex[:12]}")
    await terminal.start([str(OPENCODE), "attach", live.url, *options], cwd or live.workspace, env)
    try:
        yield terminal
    finally:
        await terminal.stop()


async def test_opencode_tui_runs_a_turn_approves_a_tool_and_reverts_it(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = {**fake_provider_config(fake_openai), "permission": {"edit": "ask"}}
    async with (
        start_live_server(tmp_path, fake_openai, config) as live,
        opencode_attached(live, tmp_path / "home") as tui,
    ):
        (live.workspace / "notes.md").write_text("The launch is on Tuesday.\n")
        await tui.shows("Ask anything")

        # A typed prompt, with a file picked by `@` search, runs a turn; the reply appears on screen.
        live.fake.enqueue(reply("Hello from Agent Forge, through opencode."))
        await tui.type("@note")
        await tui.until(lambda screen: "notes.md" in screen and "@note" in screen, "the @ file match")
        await tui.press("Enter")
        await tui.type("say hello")
        await tui.press("Enter")
        await tui.shows("Hello from Agent Forge, through opencode.")
        assert "The launch is on Tuesday." in str(live.fake.requests[-1]["messages"])
        [session] = (await live.client.get("/session")).json()

        # A tool that asks: the permission prompt appears in the UI and is allowed once from it.
        written = live.workspace / "tui.txt"
        live.fake.enqueue(
            call("write", {"filePath": "tui.txt", "content": "written from the TUI\n"}),
            reply("The file is written."),
        )
        await tui.type("write the file")
        await tui.press("Enter")
        await tui.shows("Permission required")
        assert not written.exists()
        await tui.press("Enter")  # "Allow once" is selected
        await tui.shows("The file is written.")
        assert written.read_text() == "written from the TUI\n"

        # /undo reverts the last turn: the UI says so, and the file is gone again.
        await tui.type("/undo")
        await tui.shows("Undo previous message")
        await tui.press("Enter")
        await tui.shows("message reverted")
        assert not written.exists()
        reverted = (await live.client.get(f"/session/{session['id']}")).json()
        history = (await live.client.get(f"/session/{session['id']}/message")).json()
        users = [item["info"]["id"] for item in history if item["info"]["role"] == "user"]
        assert reverted["revert"]["messageID"] == users[1]  # the turn that wrote the file


async def test_opencode_tui_switches_agent_and_aborts_a_running_turn_with_escape(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with (
        start_live_server(tmp_path, fake_openai) as live,
        opencode_attached(live, tmp_path / "home") as tui,
    ):
        await tui.shows("Ask anything")
        await tui.press("Tab")  # the next primary agent: plan
        await tui.shows("Plan")
        gate = asyncio.Event()
        live.fake.enqueue(Script().text("Thinking about it").pause(gate).text(" for ever").finish("stop"))
        await tui.type("take your time")
        await tui.press("Enter")
        await tui.shows("Thinking about it")
        [session] = (await live.client.get("/session")).json()
        await tui.until(lambda screen: "interrupt" in screen, "the interrupt hint")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SCREEN_TIMEOUT
        # opencode interrupts on a second Escape pressed soon after the first.
        while (await live.client.get("/session/status")).json():
            assert loop.time() < deadline, await tui.screen()
            await tui.press("Escape")
            await asyncio.sleep(POLL)
        gate.set()
        history = (await live.client.get(f"/session/{session['id']}/message")).json()
        assert history[0]["info"]["agent"] == "plan"
        assert history[-1]["info"]["error"]["name"] == "MessageAbortedError"


async def test_opencode_tui_signs_in_with_an_api_key_and_works_in_its_tenants_workspace(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = {**fake_provider_config(fake_openai), "auth": {"required": True}}
    async with start_live_server(tmp_path, fake_openai, config) as live:
        minted = mint_api_key("acme", "tui", frozenset({MEMBER}), "test")
        await live.runtime.store.create_api_key(minted.stored)
        workspace = live.settings.data_dir / "tenants" / "acme" / "workspace"
        workspace.mkdir(parents=True)
        (workspace / "roadmap.md").write_text("acme's roadmap\n")
        # opencode sends the password as Basic `opencode:<password>`; the API key is the password.
        async with opencode_attached(
            live, tmp_path / "home", "--password", minted.token, cwd=workspace
        ) as tui:
            await tui.shows("Ask anything")
            live.fake.enqueue(call("read", {"filePath": "roadmap.md"}), reply("Read acme's roadmap."))
            await tui.type("read the roadmap")
            await tui.press("Enter")
            await tui.shows("Read acme's roadmap.")
            # A question the model asks is answered inline.
            question = {"question": "Which quarter?", "header": "Quarter", "options": QUARTERS}
            live.fake.enqueue(call("question", {"questions": [question]}), reply("Q2 it is."))
            await tui.type("plan the launch")
            await tui.press("Enter")
            await tui.shows("Which quarter?")
            await tui.press("Down")  # the second option
            await tui.press("Enter")
            await tui.shows("Q2 it is.")
        headers = {"Authorization": f"Bearer {minted.token}"}
        [session] = (await live.client.get("/session", headers=headers)).json()
        assert session["directory"] == str(workspace)
        assert "acme's roadmap" in str(live.fake.requests[-2]["messages"])
        history = (await live.client.get(f"/session/{session['id']}/message", headers=headers)).json()
        asked = [p for m in history for p in m["parts"] if p["type"] == "tool" and p["tool"] == "question"]
        assert asked[0]["state"]["metadata"]["answers"] == [["Q2"]]
        assert (await live.client.get("/session")).status_code == 401  # no credential, no answer
