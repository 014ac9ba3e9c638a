"""A command's process (tools/process.py): what its child starts with, however the server was started."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from agentforge.tools.process import run_process_group
from agentforge.tools.sandbox import NO_SANDBOX


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


async def _run(command: str, cwd: Path) -> tuple[int | None, str]:
    chunks: list[bytes] = []

    async def collect(chunk: bytes) -> None:
        chunks.append(chunk)

    outcome = await run_process_group(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=dict(os.environ),
        time_limit=30,
        abort=asyncio.Event(),
        on_output=collect,
        sandbox=NO_SANDBOX,
    )
    return outcome.exit_code, b"".join(chunks).decode()


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
        code, output = await _run(f"kill -{number} $$; echo survived", tmp_path)
    assert (code, output) == (-number, "")
