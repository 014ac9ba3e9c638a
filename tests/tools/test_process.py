"""A command's process (tools/process.py): what its child starts with, however the server was started."""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from agentforge.tools.process import _default_signal_prefix
from agentforge.tools.sandbox import NO_SANDBOX, CommandSandbox, Sandbox, View
from tests.sandboxing import BWRAP, requires_sandbox
from tests.server_signals import server_blocking, server_ignoring
from tests.tools.harness import run_command

MASKS = "exec grep -E '^Sig(Ign|Blk)' /proc/self/status"  # the masks the command's program starts with
SIGNALS = [signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM, signal.SIGTSTP]


def _in_bwrap(workspace: Path) -> CommandSandbox:
    sandbox = Sandbox(kind="bwrap", view=View(host=True, writable=(workspace.resolve(),)), bwrap=BWRAP)
    return sandbox.command(network=False)


@pytest.mark.parametrize("number", SIGNALS, ids=lambda number: signal.Signals(number).name)
@pytest.mark.parametrize("state", [server_ignoring, server_blocking], ids=["ignored", "blocked"])
@pytest.mark.parametrize(
    "sandboxed", [False, pytest.param(True, marks=requires_sandbox)], ids=["unsandboxed", "in-bwrap"]
)
async def test_a_command_gets_every_signal_at_its_default_whatever_the_server_ignores_or_blocks(
    tmp_path: Path, state: Callable[[int], AbstractContextManager[None]], number: int, sandboxed: bool
) -> None:
    jail = _in_bwrap(tmp_path) if sandboxed else NO_SANDBOX
    with state(number):
        code, output = await run_command(jail, MASKS, tmp_path)
    masks = dict(line.split(":\t") for line in output.splitlines())
    assert code == 0 and set(masks) == {"SigIgn", "SigBlk"}
    bit = 1 << (number - 1)
    assert not int(masks["SigIgn"], 16) & bit and not int(masks["SigBlk"], 16) & bit


def test_a_terminal_program_gets_the_keys_signals_back_through_env_where_it_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The host's env answers the probe (coreutils here); an env without `--default-signal` (busybox's)
    or none at all leaves sandboxed terminals as they were, said once in the log, and the answer is
    kept."""
    prefix = _default_signal_prefix()
    assert prefix is not None and prefix[1:] == ("--default-signal=INT,QUIT", "--")

    def ignoring_the_keys() -> None:  # as bwrap starts
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)

    argv = [*prefix, "sh", "-c", MASKS]
    started = subprocess.run(argv, capture_output=True, text=True, check=True, preexec_fn=ignoring_the_keys)
    ignored = int(dict(line.split(":\t") for line in started.stdout.splitlines())["SigIgn"], 16)
    assert not ignored & (1 << (signal.SIGINT - 1) | 1 << (signal.SIGQUIT - 1))

    older = tmp_path / "older"
    older.mkdir()
    refusing = 'case $1 in --default-signal*) exit 125;; esac\nexec /usr/bin/env "$@"\n'
    (older / "env").write_text(f"#!/bin/sh\n{refusing}")
    (older / "env").chmod(0o755)
    missing = tmp_path / "missing"
    missing.mkdir()
    with caplog.at_level(logging.WARNING, logger="agentforge.tools.process"):
        assert _default_signal_prefix(str(older)) is None
        assert _default_signal_prefix(str(missing)) is None
        assert _default_signal_prefix(str(older)) is None  # kept: not probed or said again
    warned = [record.getMessage() for record in caplog.records]
    assert warned == [
        f"no env with --default-signal on {older}: ^C or ^\\ in a sandboxed terminal ends it",
        f"no env with --default-signal on {missing}: ^C or ^\\ in a sandboxed terminal ends it",
    ]
