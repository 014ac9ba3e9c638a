"""A command's process (tools/process.py): what its child starts with, however the server was started."""

from __future__ import annotations

import signal
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from agentforge.tools.sandbox import NO_SANDBOX
from tests.sandboxing import jail, requires_sandbox
from tests.server_signals import server_blocking, server_ignoring
from tests.tools.harness import run_command

MASKS = "exec grep -E '^Sig(Ign|Blk)' /proc/self/status"  # the masks the command's program starts with
SIGNALS = [signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM, signal.SIGTSTP]


@pytest.mark.parametrize("number", SIGNALS, ids=lambda number: signal.Signals(number).name)
@pytest.mark.parametrize("state", [server_ignoring, server_blocking], ids=["ignored", "blocked"])
@pytest.mark.parametrize(
    "sandboxed", [False, pytest.param(True, marks=requires_sandbox)], ids=["unsandboxed", "in-bwrap"]
)
async def test_a_command_gets_every_signal_at_its_default_whatever_the_server_ignores_or_blocks(
    tmp_path: Path, state: Callable[[int], AbstractContextManager[None]], number: int, sandboxed: bool
) -> None:
    sandbox = jail(tmp_path) if sandboxed else NO_SANDBOX
    with state(number):
        code, output = await run_command(sandbox, MASKS, tmp_path)
    masks = dict(line.split(":\t") for line in output.splitlines())
    assert code == 0 and set(masks) == {"SigIgn", "SigBlk"}
    bit = 1 << (number - 1)
    assert not int(masks["SigIgn"], 16) & bit and not int(masks["SigBlk"], 16) & bit
