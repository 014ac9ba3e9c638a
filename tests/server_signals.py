"""The signal dispositions a server inherits from how it was started, set for the test's process."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def server_ignoring(number: int) -> Iterator[None]:
    """As a script's `agentforge serve &` (SIGQUIT), nohup (SIGHUP) or a backgrounded `run` (SIGINT)
    leaves the server: the signal ignored."""
    previous = signal.signal(number, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(number, previous)


@contextmanager
def server_blocking(number: int) -> Iterator[None]:
    """The signal blocked in the thread that starts children."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, [number])
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def as_started(number: int) -> Iterator[None]:
    """The server as the test runner started it (`number` left as it is)."""
    yield
