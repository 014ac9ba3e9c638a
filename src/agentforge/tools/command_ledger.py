"""The commands running now, recorded on disk, so a server killed outright cannot leave them behind.

A command's group leader dies with the server (PR_SET_PDEATHSIG, or bwrap's `--die-with-parent`),
but what it started in the background would live on and, say, write a file after the history says
the command was aborted. So every command gets a token: a file named after it in the ledger
directory, written before the command starts and removed when it has ended, and the same token in
the command's environment, which its descendants inherit. Two things kill every process group
holding a token the ledger still lists. The reaper: a small process each server starts (`Reaper`,
this file run as a script, standard library only so it starts fast) that waits for the server to
die (its stdin, a pipe only the server holds, reaches end of file) and then kills what that server
left; and the next start-up (runtime/recovery.py), for what a run whose reaper died too left. A
process is recognised by its environment, never by a bare pid or group number, which the system may
have given to someone else since. Entries are prefixed by the server instance that wrote them, so a
reaper never touches the commands of a server started after its own.

Several servers may share one data directory (each with its own database). Each instance holds an
exclusive flock on `<instance>.lock` in the ledger directory for its whole life, taken before its
first entry is written; start-up recovery reaps only the entries of instances whose lock it can take,
that is of dead ones, and never the running commands of a live neighbour.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

TOKEN_VARIABLE: Final = "AGENTFORGE_COMMAND_TOKEN"
# This server process: the prefix of the entries it writes.
INSTANCE: Final = secrets.token_hex(6)
_PROC: Final = Path("/proc")
LOCK_SUFFIX: Final = ".lock"
# The instance locks this process holds, by path: open until the process dies, which releases them.
_HELD: dict[Path, int] = {}
_HELD_GUARD = threading.Lock()


class CommandLedger:
    def __init__(self, directory: Path, instance: str = INSTANCE) -> None:
        self.directory = directory
        self.instance = instance

    async def open_entry(self) -> str:
        """A new token, recorded durably before the command that carries it starts."""
        token = f"{self.instance}-{secrets.token_hex(12)}"
        await asyncio.to_thread(self._write, token)
        return token

    async def close_entry(self, token: str) -> None:
        await asyncio.to_thread(self._remove, token)

    def hold_instance_lock(self) -> None:
        """Mark this instance live for as long as the process lives (idempotent). Blocking."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._lock_path(self.instance)
        with _HELD_GUARD:
            if path in _HELD:
                return
            fd = None
            while fd is None:  # blocking: recovery may hold it a moment, to clean it up
                fd = _lock(path, blocking=True)
            _HELD[path] = fd

    def _lock_path(self, instance: str) -> Path:
        return self.directory / f"{instance}{LOCK_SUFFIX}"

    def _write(self, token: str) -> None:
        self.hold_instance_lock()  # before the entry: a listed command's instance always has a lock
        path = self.directory / token
        with path.open("x") as entry:
            entry.flush()
            os.fsync(entry.fileno())

    def _remove(self, token: str) -> None:
        (self.directory / token).unlink(missing_ok=True)

    def kill_leftovers(self) -> int:
        """Kill the process groups of the commands listed by dead instances (those whose lock can be
        taken); returns how many groups were killed. Blocking (reads /proc): call it off the loop."""
        if not self.directory.is_dir():
            return 0
        killed = 0
        for instance in sorted(self._listed_instances()):
            lock = self._lock_path(instance)
            with _HELD_GUARD:
                fd = None if lock in _HELD else _lock(lock, blocking=False)
            if fd is None:
                continue  # a live server's: its commands are running, not left over
            try:
                killed += self.kill_instance(instance)
                lock.unlink(missing_ok=True)
            finally:
                os.close(fd)
        return killed

    def _listed_instances(self) -> set[str]:
        """Instances with entries or a lock file (a dead one's lock file is cleaned up too)."""
        return {
            e.name.removesuffix(LOCK_SUFFIX).split("-", 1)[0] for e in self.directory.iterdir() if e.is_file()
        }

    def kill_instance(self, instance: str) -> int:
        """Kill the process groups of every command `instance` lists, which must be dead or stopping
        (its reaper's call); returns how many groups were killed. Blocking."""
        if not self.directory.is_dir():
            return 0
        prefix = f"{instance}-"
        tokens = {
            e.name
            for e in self.directory.iterdir()
            if e.is_file() and e.name.startswith(prefix) and not e.name.endswith(LOCK_SUFFIX)
        }
        if not tokens:
            return 0
        killed = 0
        for pgid in sorted(_groups_holding(tokens)):
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for token in tokens:
            self._remove(token)
        if killed:
            log.warning("Killed %d command process group(s) a previous server run left running", killed)
        return killed


def _lock(path: Path, *, blocking: bool) -> int | None:
    """An open descriptor holding the exclusive lock on the file at `path`, or None when another
    holds it, or when the file was unlinked (by a recovery cleaning it up) before we locked it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass
    os.close(fd)
    return None


def _groups_holding(tokens: set[str]) -> set[int]:
    """The process groups of the processes whose environment carries one of `tokens`."""
    wanted = {f"{TOKEN_VARIABLE}={token}".encode() for token in tokens}
    groups: set[int] = set()
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = set((entry / "environ").read_bytes().split(b"\0"))
            if environ & wanted:
                groups.add(os.getpgid(int(entry.name)))
        except (OSError, ProcessLookupError):
            continue  # gone meanwhile, or not ours to read
    groups.discard(os.getpgrp())  # never our own group, whatever its environment says
    return groups


class Reaper:
    """This server's reaper: kills what the server's commands left the moment the server dies."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, ledger: CommandLedger) -> Reaper:
        # -I -S: no site-packages, no environment: the script needs only the standard library.
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            __file__,
            str(ledger.directory),
            ledger.instance,
            stdin=asyncio.subprocess.PIPE,
            start_new_session=True,  # not in the server's group: a ^C there must not kill it first
        )
        return cls(process)

    async def stop(self) -> None:
        """The server is stopping: the reaper kills what is still listed (normally nothing) and exits."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), REAPER_STOP_SECONDS)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()


REAPER_STOP_SECONDS: Final = 10.0


def _reap(directory: str, instance: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass  # the server never writes: only end of file matters
    CommandLedger(Path(directory), instance).kill_instance(instance)


if __name__ == "__main__":
    _reap(sys.argv[1], sys.argv[2])
