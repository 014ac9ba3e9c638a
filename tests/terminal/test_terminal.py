"""One terminal on a real pseudo-terminal: its output counted in UTF-16 code units (as opencode's
clients count it), kept for clients connecting later, and its exit code."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from agentforge.terminal.terminal import Client, Terminal
from agentforge.tools.process import start_pty
from agentforge.tools.sandbox import NO_SANDBOX, CommandSandbox
from tests.sandboxing import jail, requires_sandbox
from tests.server_signals import as_started, server_ignoring


async def _finished(argv: list[str], cwd: Path, sandbox: CommandSandbox = NO_SANDBOX) -> Terminal:
    exited = asyncio.Event()
    started = await start_pty(argv, cwd=cwd, env={"PATH": "/usr/bin:/bin"}, sandbox=sandbox)
    terminal = Terminal("pty_test", "test", argv, str(cwd), started, lambda _t: exited.set())
    await asyncio.wait_for(exited.wait(), 10)
    return terminal


async def test_output_is_counted_in_code_units_and_kept(tmp_path: Path) -> None:
    terminal = await _finished(["/bin/sh", "-c", "printf '\\360\\237\\230\\200ab'; exit 7"], tmp_path)
    try:
        assert terminal.info().status == "exited" and terminal.exit_code == 7
        assert terminal.cursor == 4  # the emoji is two code units, as in a JavaScript string
        assert terminal.since(0) == "\N{GRINNING FACE}ab"
        assert terminal.since(2) == "ab"
        assert terminal.since(4) == ""
        missed, client = terminal.attach(3)
        assert missed == "b" and client.ended  # the terminal is over: nothing more will come
    finally:
        await terminal.close()


async def test_a_killed_process_reports_the_signal_like_a_shell(tmp_path: Path) -> None:
    terminal = await _finished(["/bin/sh", "-c", "kill -TERM $$"], tmp_path)
    try:
        assert terminal.exit_code == 128 + 15
    finally:
        await terminal.close()


@pytest.mark.parametrize(
    ("key", "number", "state"),
    [
        ("\x03", signal.SIGINT, as_started),
        ("\x03", signal.SIGINT, server_ignoring),
        ("\x1c", signal.SIGQUIT, server_ignoring),
    ],
    ids=["ctrl-c", "ctrl-c-server-ignoring-sigint", "ctrl-backslash-server-ignoring-sigquit"],
)
async def test_the_terminal_is_its_controlling_one_so_its_keys_signal_the_job(
    tmp_path: Path, key: str, number: int, state: Callable[[int], AbstractContextManager[None]]
) -> None:
    """/dev/tty opens (the child's session has the terminal) and ^C (^\\) typed into it signals the
    foreground job; without a controlling terminal both fail and the sleep runs on. So also when the
    server ignores the signal (how it was started), which a child would inherit."""
    with state(number):
        await _signalled_by_key(tmp_path, key, number)


async def _signalled_by_key(tmp_path: Path, key: str, number: int) -> None:
    # `exec sleep`: the shell forking it would ignore a ^C that lands between its fork and the
    # child's exec (the shell's own race, which a person's ^C a moment later does not meet).
    argv = ["/bin/sh", "-c", "exec 3</dev/tty && echo ready && exec sleep 30"]
    terminal = await _after_key(argv, tmp_path, key, NO_SANDBOX)
    assert terminal.exit_code == 128 + number  # the signal, as a shell reports it


async def _after_key(argv: list[str], cwd: Path, key: str, sandbox: CommandSandbox) -> Terminal:
    """The terminal running `argv`, ended after `key` was typed once it printed `ready`."""
    exited = asyncio.Event()
    started = await start_pty(argv, cwd=cwd, env={"PATH": "/usr/bin:/bin"}, sandbox=sandbox)
    terminal = Terminal("pty_test", "test", argv, str(cwd), started, lambda _t: exited.set())
    try:
        _, client = terminal.attach(0)
        await _read_until(client, "ready")
        terminal.write(key)
        await asyncio.wait_for(exited.wait(), 10)
    finally:
        await terminal.close()
    return terminal


@requires_sandbox
@pytest.mark.parametrize("confined", [False, True], ids=["host-view", "confined-with-limits"])
@pytest.mark.parametrize(
    ("key", "number"), [("\x03", signal.SIGINT), ("\x1c", signal.SIGQUIT)], ids=["ctrl-c", "ctrl-backslash"]
)
async def test_in_the_sandbox_a_key_reaches_the_program_not_the_sandbox(
    tmp_path: Path, key: str, number: signal.Signals, confined: bool
) -> None:
    """A sandboxed program that does no job control and traps ^C (^\\) gets it and goes on; one that
    does not trap it is ended by it (bwrap, in the same foreground group, used to die of it first)."""
    trap = f"trap 'echo caught; exit 5' {number.name.removeprefix('SIG')}"
    looping = ["/bin/sh", "-c", f"{trap}; echo ready; while :; do sleep 0.05; done"]
    handled = await _after_key(looping, tmp_path, key, jail(tmp_path, confined=confined))
    assert handled.exit_code == 5 and "caught" in handled.since(0)
    sleeping = ["/bin/sh", "-c", "echo ready && exec sleep 30"]
    ended = await _after_key(sleeping, tmp_path, key, jail(tmp_path, confined=confined))
    assert ended.exit_code == 128 + number  # bwrap reports its program's signal as a shell does


@requires_sandbox
async def test_in_the_sandbox_an_interactive_shell_interrupts_its_foreground_job(tmp_path: Path) -> None:
    """bash doing job control gives its job a process group of its own, so bwrap never saw its keys:
    a guard, not the fix's test. ^C still ends the foreground job (it gets SIGINT back at its
    default, not ignored as bwrap starts), and the shell goes on."""
    argv = ["/bin/bash", "--norc", "--noprofile", "-i"]
    exited = asyncio.Event()
    env = {"PATH": "/usr/bin:/bin", "PS1": "$ "}
    started = await start_pty(argv, cwd=tmp_path, env=env, sandbox=jail(tmp_path))
    terminal = Terminal("pty_test", "test", argv, str(tmp_path), started, lambda _t: exited.set())
    try:
        _, client = terminal.attach(0)
        # The job says it started (by then it holds the terminal: bash hands it over in the child),
        # in words split where typed, so that the terminal's echo of the line does not match.
        await _read_until(client, "$ ")
        terminal.write("""sh -c 'echo st""arted; exec sleep 30'\n""")
        await _read_until(client, "started")
        terminal.write("\x03")
        terminal.write('echo "alive-$?"\n')
        await _read_until(client, "alive-130")
        terminal.write("exit\n")
        await asyncio.wait_for(exited.wait(), 10)
        assert terminal.exit_code == 0
    finally:
        await terminal.close()


async def _read_until(client: Client, wanted: str) -> None:
    seen = ""
    while wanted not in seen:
        chunk = await asyncio.wait_for(client.next(), 10)
        assert chunk is not None, f"ended before {wanted!r}: {seen!r}"
        seen += chunk


@requires_sandbox
async def test_in_the_sandbox_a_program_whose_name_holds_an_equals_sign_runs(tmp_path: Path) -> None:
    """A first word with "=" is a program, not a variable for env to set: it starts as before."""
    script = tmp_path / "a=b.sh"
    script.write_text("#!/bin/sh\necho script-ran\n")
    script.chmod(0o755)
    terminal = await _finished(["./a=b.sh"], tmp_path, jail(tmp_path))
    try:
        assert terminal.exit_code == 0 and "script-ran" in terminal.since(0)
    finally:
        await terminal.close()


@requires_sandbox
async def test_a_terminal_runs_in_the_sandbox_and_keeps_its_terminal(tmp_path: Path) -> None:
    workspace = (tmp_path / "workspace").resolve()
    outside = (tmp_path / "outside").resolve()
    workspace.mkdir()
    outside.mkdir()
    script = f"echo in > inside.txt; echo out > {outside}/escape.txt; tty >/dev/null && echo has-a-terminal"

    terminal = await _finished(["/bin/sh", "-c", script], workspace, jail(workspace))

    try:
        output = terminal.since(0)
        assert (workspace / "inside.txt").read_text() == "in\n"
        assert not (outside / "escape.txt").exists() and "cannot create" in output
        assert "has-a-terminal" in output  # still the controlling terminal: job control works
    finally:
        await terminal.close()
