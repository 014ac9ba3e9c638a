"""A command's process (tools/process.py): what its child starts with, however the server was started."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from agentforge.tools.sandbox import NO_SANDBOX
from tests.tools.harness import run_command


@contextmanager
def _server_ignoring(number: int) -> Iterator[None]:
    """The server as a script's `agentforge serve &` (or nohup) leaves it: the signal ignored."""
    previous = signal.signal(number, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(number, previous)


@contextmanager
def _server_blocking(number: int) -> Iterator[None]:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, [number])
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@pytest.mark.parametrize(
    ("state", "number"),
    [
        (_server_ignoring, signal.SIGINT),
        (_server_ignoring, signal.SIGQUIT),
        (_server_blocking, signal.SIGINT),
    ],
)
async def test_a_command_gets_the_signals_at_their_defaults_whatever_the_server_ignores_or_blocks(
    tmp_path: Path, state: Callable[[int], AbstractContextManager[None]], number: int
) -> None:
    with state(number):
        code, output = await run_command(
            NO_SANDBOX, "exec grep -E '^Sig(Ign|Blk)' /proc/self/status", tmp_path
        )
    masks = dict(line.split(":\t") for line in output.splitlines())
    assert code == 0 and set(masks) == {"SigIgn", "SigBlk"}
    bit = 1 << (number - 1)
    assert not int(masks["SigIgn"], 16) & bit and not int(masks["SigBlk"], 16) & bit
