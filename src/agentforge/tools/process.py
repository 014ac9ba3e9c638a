"""Running a command in its own process group, streaming its output, and killing the whole group.

A shell command may start children (pipelines, `make`, test runners); killing only the shell would
leave them running. The child gets a new session (and so its own process group), which we signal as
a whole: SIGTERM first, SIGKILL once the grace period is over.

We use the low-level subprocess protocol rather than `asyncio.subprocess.Process`: its `wait()`
(Python 3.11) only returns once every pipe is closed, so a background child that inherited stdout
(`server &`) would keep the tool waiting; the protocol tells us about the exit itself, and lets us
close the pipe when we stop reading.

Every command goes through its `CommandSandbox` (tools/sandbox.py), a required argument: a call site
cannot forget it. Inside bwrap a command gets a new session of its own too; the process we start
and signal is bwrap, and when it dies the kernel kills everything in the sandbox's PID namespace.
`start_pty` starts the other kind of command: an interactive terminal (the `/pty` routes), on a
pseudo-terminal instead of pipes. A terminal's program keeps the terminal's session, bwrap with it,
so bwrap starts with the signals of the terminal's keys ignored (sandbox.py `TERMINAL_KEY_SIGNALS`).

No command outlives the server: its leader gets SIGKILL when the server dies (PR_SET_PDEATHSIG, set
in the child before exec; bwrap also has `--die-with-parent`), and what it started in the background
is killed through the command ledger (tools/command_ledger.py): by the ledger's reaper the moment the
server dies, and at the next start-up should the reaper have died too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import os
import pty
import signal
import struct
import subprocess
import termios
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from agentforge.tools.command_ledger import TOKEN_VARIABLE
from agentforge.tools.sandbox import TERMINAL_KEY_SIGNALS, CommandSandbox

KILL_GRACE_SECONDS = 3.0
KILL_CONFIRM_SECONDS = 1.0
# After the command exits we read on until the pipe closes. Normally that is at once; a background
# child that inherited stdout keeps it open, and we must not wait for that one: we stop once no
# output is pending for DRAIN_GRACE_SECONDS, and in any case after DRAIN_LIMIT_SECONDS.
DRAIN_GRACE_SECONDS = 0.25
DRAIN_LIMIT_SECONDS = 5.0
# Stop reading the pipe while this many chunks wait for the consumer (the child then blocks on
# write instead of us buffering without bound); resume once the backlog is down to RESUME_AT.
PAUSE_AT = 64
RESUME_AT = 8
STDOUT_FD = 1

OnOutput = Callable[[bytes], Awaitable[None]]
Ending = Literal["exited", "timeout", "aborted"]


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    exit_code: int | None
    ending: Ending
    pid: int


class _CommandProtocol(asyncio.SubprocessProtocol):
    def __init__(self) -> None:
        self.exited = asyncio.Event()
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._transport: asyncio.SubprocessTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self._transport = transport

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        self._chunks.put_nowait(bytes(data))
        if not self._paused and self._chunks.qsize() >= PAUSE_AT:
            self._set_reading(False)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == STDOUT_FD:
            self._chunks.put_nowait(None)

    def has_backlog(self) -> bool:
        """Output received (or held back in the pipe) that the consumer has not taken yet."""
        return self._paused or not self._chunks.empty()

    def process_exited(self) -> None:
        self.exited.set()

    def _set_reading(self, reading: bool) -> None:
        pipe = self._transport.get_pipe_transport(STDOUT_FD) if self._transport else None
        if isinstance(pipe, asyncio.ReadTransport) and not pipe.is_closing():
            if reading:
                pipe.resume_reading()
            else:
                pipe.pause_reading()
        self._paused = not reading

    async def pump(self, on_output: OnOutput) -> None:
        """Hand every chunk to `on_output` until the pipe closes."""
        while (chunk := await self._chunks.get()) is not None:
            if self._paused and self._chunks.qsize() <= RESUME_AT:
                self._set_reading(True)
            await on_output(chunk)


async def run_process_group(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float | None,
    abort: asyncio.Event,
    on_output: OnOutput,
    sandbox: CommandSandbox,
    kill_grace: float = KILL_GRACE_SECONDS,
) -> ProcessOutcome:
    """Run `argv` in `sandbox` with stdin closed and stdout+stderr combined, feeding output to
    `on_output`. Raises SandboxRefusedError (before starting anything) when it may not run.

    Ends when the process exits, when `time_limit` seconds pass or when `abort` is set (then the
    group is killed, SIGKILL following SIGTERM after `kill_grace` seconds). If the awaiting task
    is cancelled, the group is killed before the cancellation propagates.
    """
    command = await _sandboxed(argv, cwd, sandbox)
    ledger = sandbox.sandbox.ledger
    if ledger is None:
        return await _run_group(command, cwd, dict(env), time_limit, abort, on_output, kill_grace)
    token = await ledger.open_entry()
    try:
        env = {**env, TOKEN_VARIABLE: token}
        return await _run_group(command, cwd, env, time_limit, abort, on_output, kill_grace)
    finally:
        await ledger.close_entry(token)


async def _run_group(
    command: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    time_limit: float | None,
    abort: asyncio.Event,
    on_output: OnOutput,
    kill_grace: float,
) -> ProcessOutcome:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        _CommandProtocol,
        *command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_in_child(),
    )
    pid = transport.get_pid()
    pump = asyncio.create_task(protocol.pump(on_output))
    try:
        ending = await _wait_for_ending(protocol.exited, abort, time_limit)
        if ending != "exited":
            await terminate_group(pid, protocol.exited, kill_grace)
        await _drain(pump, protocol)
    except asyncio.CancelledError:
        await terminate_group(pid, protocol.exited, kill_grace)
        raise
    finally:
        if not pump.done():
            pump.cancel()
        exit_code = transport.get_returncode()
        transport.close()  # stop reading a pipe a background child may still hold
    return ProcessOutcome(exit_code=exit_code, ending=ending, pid=pid)


async def _sandboxed(argv: Sequence[str], cwd: Path, sandbox: CommandSandbox) -> list[str]:
    # Building the mounts looks at the filesystem (which paths exist): off the event loop.
    return await asyncio.to_thread(sandbox.wrap, argv, cwd)


async def _wait_for_ending(exited: asyncio.Event, abort: asyncio.Event, time_limit: float | None) -> Ending:
    exit_waiter = asyncio.create_task(exited.wait())
    abort_waiter = asyncio.create_task(abort.wait())
    try:
        done, _ = await asyncio.wait(
            {exit_waiter, abort_waiter}, timeout=time_limit, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        exit_waiter.cancel()
        abort_waiter.cancel()
    if exit_waiter in done:
        return "exited"
    return "aborted" if abort_waiter in done else "timeout"


async def _drain(pump: asyncio.Task[None], protocol: _CommandProtocol) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_LIMIT_SECONDS
    while True:
        done, _ = await asyncio.wait({pump}, timeout=DRAIN_GRACE_SECONDS)
        if pump in done:
            pump.result()  # surface a failure of the output handler
            return
        if not protocol.has_backlog() or loop.time() >= deadline:
            return


def signal_group(pgid: int, signum: signal.Signals) -> bool:
    """Send `signum` to every process of the group; False when the group is already gone."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Only possible if the pgid was reused by someone else's group: leave it alone.
        return False
    return True


async def terminate_group(pgid: int, exited: asyncio.Event, grace: float = KILL_GRACE_SECONDS) -> None:
    """SIGTERM the process group, wait up to `grace` for its leader, then SIGKILL what is left.

    `pgid` is the leader's pid (a new session makes the child its group's leader) and `exited` is
    set when the leader has exited. Returns once the leader is gone. If we are cancelled while
    waiting, SIGKILL at once and let the cancellation through.
    """
    signal_group(pgid, signal.SIGTERM)
    try:
        await asyncio.wait_for(exited.wait(), grace)
    except TimeoutError:
        signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            # SIGKILL cannot be ignored; this only gives the kernel and child watcher a moment.
            await asyncio.wait_for(exited.wait(), KILL_CONFIRM_SECONDS)
    except asyncio.CancelledError:
        signal_group(pgid, signal.SIGKILL)
        raise
    else:
        # The leader is gone; children that ignored SIGTERM must not outlive the command.
        signal_group(pgid, signal.SIGKILL)


@dataclass(slots=True)
class PtyProcess:
    """A process on a pseudo-terminal: `fd` is the terminal's controlling side (non-blocking), which
    the caller reads, writes, resizes and closes."""

    process: asyncio.subprocess.Process
    fd: int


_PR_SET_PDEATHSIG = 1
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in each child


def _die_with_server() -> Callable[[], None]:
    """What the child runs between fork and exec: SIGKILL when the server thread that started it
    dies. If the server already died, the child exits at once."""
    server = os.getpid()

    def arm() -> None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != server:
            os._exit(1)

    return arm


# Every standard signal a child may be given another disposition for, set back to its default in
# the children started here: a child inherits what the server ignores, which depends on how it was
# started (a script's `agentforge serve &` ignores SIGQUIT, so ^\ typed into a terminal did nothing;
# nohup ignores SIGHUP; a backgrounded in-process `agentforge run` SIGINT), and the mask of blocked
# signals. libuv (Node) and Bun reset every signal in their children the same way.
_RESET_SIGNALS: Final = tuple(
    number for number in signal.Signals if number < 32 and number not in (signal.SIGKILL, signal.SIGSTOP)
)


def _in_child() -> Callable[[], None]:
    """What a command's or a terminal's child runs between fork and exec: die with the server
    (`_die_with_server`), with `_RESET_SIGNALS` at their defaults and no signal blocked, however the
    server was started. Python runs there: these calls take no lock, but a handler of the server's
    may run in the child before they do (a signal arriving between the fork and the reset); an
    exception there fails the spawn (`SubprocessError`), nothing is left behind."""
    die = _die_with_server()

    def setup() -> None:
        die()
        for number in _RESET_SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())

    return setup


def _take_terminal(ignored: Sequence[signal.Signals] = ()) -> Callable[[], None]:
    """In the child, after setsid: `_in_child`'s set-up, then make its terminal (its stdin) the
    controlling one, so job control and ^C work. `ignored`: signals it starts with ignored."""
    setup = _in_child()

    def take() -> None:
        setup()
        for number in ignored:
            signal.signal(number, signal.SIG_IGN)
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return take


def set_terminal_size(fd: int, rows: int, cols: int) -> None:
    """Resize the terminal; its foreground process group gets SIGWINCH."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


async def start_pty(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    sandbox: CommandSandbox,
    rows: int = 24,
    cols: int = 80,
) -> PtyProcess:
    """Start `argv` in `sandbox` on a new pseudo-terminal, in its own session (a process group to
    kill as a whole, like `run_process_group`). Every interactive terminal starts here. Raises
    SandboxRefusedError (before starting anything) when it may not run."""
    # Building the mounts looks at the filesystem: off the event loop.
    command, keys_ignored = await asyncio.to_thread(sandbox.terminal, argv, cwd)
    controller, terminal = pty.openpty()
    try:
        set_terminal_size(controller, rows, cols)
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=cwd,
            env=dict(env),
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            start_new_session=True,
            preexec_fn=_take_terminal(TERMINAL_KEY_SIGNALS if keys_ignored else ()),
        )
    except BaseException:
        os.close(controller)
        raise
    finally:
        os.close(terminal)
    os.set_blocking(controller, False)
    return PtyProcess(process=process, fd=controller)
