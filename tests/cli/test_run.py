"""`agentforge run`: in-process and against a live server, with the fake provider."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
import typer
from rich.console import Console

from agentforge.cli.connect import run_command
from agentforge.cli.render import TurnPrinter
from agentforge.cli.run import run_turn
from agentforge.client import AsyncAgentForge
from agentforge.config import load_settings
from agentforge.runtime.runtime import Runtime
from tests.cli.conftest import Cli
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

SESSION_LINE = re.compile(r"session (ses_\w+)")


async def test_run_prints_the_answer_and_exits_0(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("Hello from the [bold]fake[/bold] model"))
    result = await cli.run_local("run", "Say hello")
    assert result.exit_code == 0, result.output
    # Printed as text, not interpreted as rich markup.
    assert result.stdout == "Hello from the [bold]fake[/bold] model\n"
    assert SESSION_LINE.search(result.stderr)
    assert fake_openai.requests[0]["messages"][-1] == {"role": "user", "content": "Say hello"}


async def test_run_in_process_works_beside_a_server_on_the_same_database(
    cli: Cli, fake_openai: FakeOpenAI
) -> None:
    # The server holds the SQLite database as its sole server; the CLI's in-process app is no server.
    server = await Runtime.open(load_settings(data_dir=cli.data_dir, directory=cli.workspace), serving=True)
    try:
        fake_openai.enqueue(reply("beside"))
        result = await cli.run_local("run", "Say hello")
        assert result.exit_code == 0, result.output
        assert result.stdout == "beside\n"
    finally:
        await server.close()


async def test_run_shows_tool_calls_and_their_results(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / "notes.txt").write_text("alpha\nbeta\n")
    fake_openai.enqueue(
        call("read", {"filePath": "notes.txt"}),
        call("read", {"filePath": "missing.txt"}),
        reply("The notes say alpha and beta."),
    )
    result = await cli.run_local("run", "What do my notes say?")
    assert result.exit_code == 0, result.output
    assert result.stdout == "The notes say alpha and beta.\n"
    markers = ("[tool]", "[ok]", "[fail]")
    tool_lines = [line for line in result.stderr.splitlines() if line.startswith(markers)]
    assert tool_lines[0] == "[tool] read filePath=notes.txt"
    assert tool_lines[1].startswith("[ok]   read: notes.txt")
    assert tool_lines[2] == "[tool] read filePath=missing.txt"
    assert tool_lines[3].startswith("[fail] read: ")
    assert len(tool_lines) == 4


async def test_a_command_that_prints_nothing_shows_no_output_not_one_line(
    cli: Cli, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(
        call("bash", {"command": "true", "description": "silent"}),
        call("bash", {"command": "printf 'a\\nb\\n'", "description": "two"}),
        reply("done"),
    )
    result = await cli.run_local("run", "Run it")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert "[ok]   bash: silent (no output)" in lines
    assert "[ok]   bash: two (2 lines of output)" in lines
    # The placeholder the model is shown is not printed as if the command had written it.
    assert "    (no output)" not in lines
    assert lines[lines.index("[ok]   bash: two (2 lines of output)") + 1 :][:2] == ["    a", "    b"]


async def test_run_exits_1_when_the_turn_fails(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().error_status(400, {"error": {"message": "the request was bad"}}))
    result = await cli.run_local("run", "hello")
    assert result.exit_code == 1
    assert "[error] the request was bad" in result.stderr
    assert result.stdout == ""
    # The message and the failed answer are stored: the error says how to continue.
    match = SESSION_LINE.search(result.stderr)
    assert match is not None
    assert f"the session is kept: continue it with --session {match.group(1)}" in result.stderr
    listed = await cli.run_local("session", "list", "--json")
    assert [entry["id"] for entry in json.loads(listed.stdout)] == [match.group(1)]


async def test_a_run_refused_before_anything_was_stored_leaves_no_session(cli: Cli) -> None:
    result = await cli.run_local("run", "hello", "--model", "nowhere/model")
    assert result.exit_code == 1
    assert "Provider not found: nowhere" in result.stderr
    listed = await cli.run_local("session", "list", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []


async def test_run_continues_a_session(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("first answer"), reply("second answer"))
    first = await cli.run_local("run", "one")
    match = SESSION_LINE.search(first.stderr)
    assert match is not None
    second = await cli.run_local("run", "two", "--session", match.group(1))
    assert second.exit_code == 0, second.output
    assert second.stdout == "second answer\n"
    # The second request carried the whole conversation.
    contents = [m["content"] for m in fake_openai.requests[1]["messages"] if m["role"] != "system"]
    assert contents == ["one", "first answer", "two"]


async def test_run_on_an_unknown_session_exits_1(cli: Cli) -> None:
    result = await cli.run_local("run", "hello", "--session", "ses_missing")
    assert result.exit_code == 1
    assert "NotFoundError" in result.stderr


async def test_usage_errors_exit_2(cli: Cli) -> None:
    assert (await cli.run_local("run", "hello", "--model", "no-slash")).exit_code == 2
    result = await cli.invoke("run")
    assert result.exit_code == 2, (result.output, result.exception)
    missing_config = await cli.invoke("run", "hello", "--config", str(cli.workspace / "nope.json"))
    assert missing_config.exit_code == 2
    assert "config file not found" in missing_config.stderr


async def test_run_against_a_live_server(live: LiveServer, cli: Cli) -> None:
    live.fake.enqueue(reply("over the network"))
    result = await cli.invoke("run", "hi", "--url", live.url)
    assert result.exit_code == 0, result.output
    assert result.stdout == "over the network\n"


async def test_run_against_an_unreachable_server_exits_1(cli: Cli) -> None:
    result = await cli.invoke("run", "hi", "--url", "http://127.0.0.1:9")
    assert result.exit_code == 1
    assert "cannot reach the server" in result.stderr


class WatchedOutput(io.StringIO):
    """stdout for `TurnPrinter` that lets a test wait for what has been printed so far."""

    def __init__(self) -> None:
        super().__init__()
        self._written = asyncio.Event()

    def write(self, text: str) -> int:
        self._written.set()
        return super().write(text)

    async def wait_until(self, done: Callable[[str], bool]) -> None:
        async with asyncio.timeout(5):
            while not done(self.getvalue()):
                self._written.clear()
                await self._written.wait()


def quiet_console() -> Console:
    return Console(file=io.StringIO())


async def test_text_is_printed_while_the_turn_is_still_running(live: LiveServer) -> None:
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("first half, ").pause(gate).text("second half").finish())
    out = WatchedOutput()
    async with AsyncAgentForge(live.url) as client:
        session = await client.create_session()
        printer = TurnPrinter(out, quiet_console())
        turn = asyncio.create_task(run_turn(client, session.id, "go", printer))
        try:
            await out.wait_until(lambda text: text == "first half, ")
            assert not turn.done()
        finally:
            gate.set()
        final = await asyncio.wait_for(turn, 5)
    assert printer.finish(final) is None
    assert out.getvalue() == "first half, second half\n"


async def test_interrupting_a_turn_aborts_it_on_the_server(live: LiveServer) -> None:
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("started ").pause(gate).text("never").finish())
    out = WatchedOutput()
    async with AsyncAgentForge(live.url) as client:
        session = await client.create_session()
        async with client.events(session.id) as watch:
            turn = asyncio.create_task(run_turn(client, session.id, "go", TurnPrinter(out, quiet_console())))
            try:
                await out.wait_until(bool)
                turn.cancel()
                await asyncio.wait({turn})
                async with asyncio.timeout(5):
                    async for event in watch:
                        if event.type == "session.idle":
                            break
            finally:
                gate.set()
        last = (await client.messages(session.id)).items[-1].wire()
        assert session.id not in await client.status()
    assert last["info"]["error"]["name"] == "MessageAbortedError"


class ClosedAfterFirstLine(WatchedOutput):
    """stdout whose reader leaves after the first line, as `| head -1` does."""

    def write(self, text: str) -> int:
        if "\n" in self.getvalue():
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


async def test_a_closed_output_aborts_the_turn_on_the_server(live: LiveServer) -> None:
    gate, held = asyncio.Event(), asyncio.Event()
    live.fake.enqueue(Script().text("one line\n").pause(gate).text("more").pause(held).finish())
    out = ClosedAfterFirstLine()
    async with AsyncAgentForge(live.url) as client:
        session = await client.create_session()
        async with client.events(session.id) as watch:
            turn = asyncio.create_task(run_turn(client, session.id, "go", TurnPrinter(out, quiet_console())))
            try:
                await out.wait_until(lambda text: "\n" in text)
                gate.set()  # the next delta cannot be printed
                with pytest.raises(BrokenPipeError):
                    await asyncio.wait_for(turn, 10)
                async with asyncio.timeout(5):
                    async for event in watch:
                        if event.type == "session.idle":
                            break
            finally:
                gate.set()
                held.set()
        last = (await client.messages(session.id)).items[-1].wire()
    assert last["info"]["error"]["name"] == "MessageAbortedError"


async def test_run_piped_into_head_exits_141_quietly(cli: Cli, fake_openai: FakeOpenAI) -> None:
    gate = asyncio.Event()
    held = asyncio.Event()
    fake_openai.enqueue(Script().text("first").pause(gate).text(" and the rest").pause(held).finish())
    stderr = cli.workspace / "stderr.txt"
    with stderr.open("wb") as errors:
        # A plain pipe, closed by hand below: asyncio's would not let the test close it early.
        process = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "agentforge.cli", "run", "hi", "--format", "json", *cli.local],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            env={**os.environ, "XDG_CONFIG_HOME": str(cli.config.parent / "xdg")},
            cwd=cli.workspace,
        )
    assert process.stdout is not None
    first = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 60)
    process.stdout.close()  # like `head -1`
    gate.set()
    try:
        code = await asyncio.wait_for(asyncio.to_thread(process.wait), 60)
    finally:
        held.set()
    assert json.loads(first)["type"]
    assert code == 141
    assert SESSION_LINE.fullmatch(stderr.read_text().strip())  # and nothing else: no traceback


async def test_run_shows_the_models_reasoning_dimmed_on_stderr(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().reasoning("Thinking it through.").text("The answer.").usage(10, 5).finish())
    result = await cli.run_local("run", "think first")
    assert result.exit_code == 0, result.output
    assert result.stdout == "The answer.\n"
    assert "[thinking] Thinking it through." in result.stderr.splitlines()


async def _bad_option() -> int:
    raise typer.BadParameter("not like that", param_hint="--thing")


def test_a_usage_error_inside_a_command_stays_a_usage_error() -> None:
    # Typer vendors its own click: its errors are no `click.ClickException`, and must not be
    # reported as an unexpected failure (exit 1) but printed by typer as usage (exit 2).
    with pytest.raises(typer.BadParameter):
        run_command(_bad_option())
