"""`agentforge run` on a terminal: a real `agentforge` process in a pseudo-terminal is asked about a
permission request and a question, answered by typing, and the turn goes on."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from typing import TypeVar

import pexpect

from agentforge.cli import exits
from tests.cli.conftest import Cli
from tests.cli.test_run_humans import QUESTION, tool_results
from tests.fakes.openai_server import FakeOpenAI, call, reply

T = TypeVar("T")
# Bounds each wait for the CLI (its start-up included), not the test's duration when all goes well.
EXPECT_SECONDS = 60


def spawn(cli: Cli, *args: str) -> pexpect.spawn[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AGENTFORGE_")}
    env["XDG_CONFIG_HOME"] = str(cli.workspace.parent / "xdg")
    env["TERM"] = "xterm"
    return pexpect.spawn(
        sys.executable,
        ["-m", "agentforge.cli", *args, *cli.local],
        cwd=str(cli.workspace),
        env=env,
        encoding="utf-8",
        timeout=EXPECT_SECONDS,
        dimensions=(50, 200),
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    """As a terminal's shell starts a command: a suite run as a background job (`.ci/run &`)
    inherits an ignored SIGINT, which the child would keep, and Ctrl-C would then do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def off_loop(work: Callable[[], T]) -> T:
    """pexpect blocks: wait in a thread while the fake provider serves from this loop."""
    return await asyncio.to_thread(work)


def finish(child: pexpect.spawn[str]) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else -1)


async def test_the_user_approves_a_request_and_answers_a_question(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / ".env").write_text("TOKEN=secret\n")
    fake_openai.enqueue(call("read", {"filePath": ".env"}), call("question", QUESTION), reply("All done."))
    child = spawn(cli, "run", "read my .env then ask me")
    try:
        await off_loop(lambda: child.expect("wants"))
        await off_loop(lambda: child.expect(r"\.env"))
        await off_loop(lambda: child.expect(r"Allow\? \[o\]nce"))
        child.sendline("o")
        await off_loop(lambda: child.expect("Which database should I use"))
        await off_loop(lambda: child.expect("Postgres"))
        await off_loop(lambda: child.expect("Answer"))
        child.sendline("2")
        await off_loop(lambda: child.expect("All done."))
        code = await off_loop(lambda: finish(child))
    finally:
        child.close(force=True)
    assert code == exits.OK
    assert "TOKEN=secret" in tool_results(fake_openai.requests[1])[0]
    assert '"Which database should I use?"="Postgres"' in tool_results(fake_openai.requests[2])[-1]


async def test_the_user_rejects_a_request_with_a_message(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / ".env").write_text("TOKEN=secret\n")
    fake_openai.enqueue(call("read", {"filePath": ".env"}), reply("never reached"))
    child = spawn(cli, "run", "read my .env")
    try:
        await off_loop(lambda: child.expect(r"Allow\? \[o\]nce"))
        child.sendline("maybe")
        await off_loop(lambda: child.expect("Type o, a or r"))
        child.sendline("r")
        await off_loop(lambda: child.expect("Tell the model why"))
        child.sendline("secrets stay private")
        await off_loop(lambda: child.expect("refused"))
        code = await off_loop(lambda: finish(child))
    finally:
        child.close(force=True)
    assert code == exits.REFUSED
    assert len(fake_openai.requests) == 1


async def test_ctrl_c_at_a_prompt_aborts_the_turn_and_exits_130(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / ".env").write_text("TOKEN=secret\n")
    fake_openai.enqueue(call("read", {"filePath": ".env"}), reply("never reached"))
    child = spawn(cli, "run", "read my .env")
    try:
        await off_loop(lambda: child.expect(r"Allow\? \[o\]nce"))
        child.sendintr()
        await off_loop(lambda: child.expect("interrupted"))
        code = await off_loop(lambda: finish(child))
    finally:
        child.close(force=True)
    assert code == exits.INTERRUPTED
    assert len(fake_openai.requests) == 1
