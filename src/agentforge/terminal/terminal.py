"""One terminal: its process on a pseudo-terminal, the output it wrote (kept for clients that connect
later), and the clients reading it.

Output is counted the way opencode's clients count it, in UTF-16 code units of the decoded text: a
client that reconnects with `cursor=N` gets what was written from N on (or from the oldest output
still kept).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.tools.process import PtyProcess, set_terminal_size, terminate_group

KEPT_OUTPUT = 1_000_000  # code units of output kept for clients that connect later
CLIENT_BACKLOG = 1024  # chunks a slow client may fall behind before it is disconnected
READ_SIZE = 65536
KILL_GRACE_SECONDS = 1.0


class PtyInfo(Wire):
    id: str
    title: str
    command: str
    args: list[str]
    cwd: str
    status: Literal["running", "exited"]
    pid: int
    exit_code: int | None = Field(default=None, alias="exitCode")


def _units(text: str) -> int:
    """The length of `text` in UTF-16 code units (a JavaScript string's length)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


@dataclass(slots=True, eq=False)  # compared and hashed by identity: kept in a set
class Client:
    """One connected reader of a terminal's output."""

    _chunks: deque[str] = field(default_factory=deque)
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False

    def offer(self, text: str) -> None:
        if len(self._chunks) >= CLIENT_BACKLOG:
            self.end()  # too far behind: it reconnects with its cursor and gets the kept output
            return
        self._chunks.append(text)
        self._wakeup.set()

    def end(self) -> None:
        self.ended = True
        self._wakeup.set()

    async def next(self) -> str | None:
        """The output that arrived since the last call (joined), or None once the stream ended."""
        while True:
            if self.ended:
                return None
            if self._chunks:
                text = "".join(self._chunks)
                self._chunks.clear()
                return text
            self._wakeup.clear()
            await self._wakeup.wait()


class Terminal:
    def __init__(
        self,
        id: str,
        title: str,
        argv: list[str],
        cwd: str,
        started: PtyProcess,
        on_exit: Callable[[Terminal], None],
    ) -> None:
        self.id = id
        self.title = title
        self.command, *rest = argv
        self.args = rest
        self.cwd = cwd
        self._process = started.process
        self._fd: int | None = started.fd
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._kept: deque[str] = deque()
        self._kept_units = 0
        self.cursor = 0  # code units written so far
        self._clients: set[Client] = set()
        self._pending_input = bytearray()
        self._exited = asyncio.Event()
        self._closed = asyncio.Event()  # output read to its end
        self.exit_code: int | None = None
        loop = asyncio.get_running_loop()
        loop.add_reader(started.fd, self._read)
        self._waiter = asyncio.create_task(self._wait(on_exit), name=f"pty:{id}")

    @property
    def pid(self) -> int:
        return self._process.pid

    def info(self) -> PtyInfo:
        return PtyInfo(
            id=self.id,
            title=self.title,
            command=self.command,
            args=self.args,
            cwd=self.cwd,
            status="exited" if self._exited.is_set() else "running",
            pid=self.pid,
            exit_code=self.exit_code,
        )

    # -- output --------------------------------------------------------------------------------

    def _read(self) -> None:
        assert self._fd is not None
        try:
            data = os.read(self._fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:  # EIO once every process closed the terminal: its output is over
            data = b""
        if not data:
            self._publish(self._decoder.decode(b"", final=True))
            self._stop_reading()
            return
        self._publish(self._decoder.decode(data))

    def _publish(self, text: str) -> None:
        if not text:
            return
        units = _units(text)
        self.cursor += units
        self._kept.append(text)
        self._kept_units += units
        while self._kept_units > KEPT_OUTPUT and len(self._kept) > 1:
            self._kept_units -= _units(self._kept.popleft())
        for client in list(self._clients):
            client.offer(text)
            if client.ended:
                self._clients.discard(client)

    def _stop_reading(self) -> None:
        if self._fd is not None:
            loop = asyncio.get_running_loop()
            loop.remove_reader(self._fd)
            loop.remove_writer(self._fd)
        self._closed.set()

    def since(self, cursor: int) -> str:
        """The kept output from `cursor` on (from the oldest kept output when that is gone)."""
        start = self.cursor - self._kept_units
        text = "".join(self._kept)
        skip = max(0, cursor - start)
        if skip == 0:
            return text
        # Walk code units back to characters (astral characters count twice).
        units = 0
        for index, char in enumerate(text):
            if units >= skip:
                return text[index:]
            units += 2 if ord(char) > 0xFFFF else 1
        return ""

    def attach(self, cursor: int) -> tuple[str, Client]:
        """What the client missed since `cursor`, and its subscription to what comes next."""
        client = Client()
        if self._closed.is_set():
            client.end()
        else:
            self._clients.add(client)
        return self.since(cursor), client

    def detach(self, client: Client) -> None:
        self._clients.discard(client)

    # -- input and control ------------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Type `text` into the terminal (what a client's keys send)."""
        if self._fd is None or self._exited.is_set():
            return
        self._pending_input += text.encode()
        self._flush()

    def _flush(self) -> None:
        if self._fd is None:
            return
        loop = asyncio.get_running_loop()
        try:
            written = os.write(self._fd, self._pending_input)
        except BlockingIOError:
            written = 0
        except OSError:
            self._pending_input.clear()  # the terminal is gone
            loop.remove_writer(self._fd)
            return
        del self._pending_input[:written]
        if self._pending_input:
            loop.add_writer(self._fd, self._flush)
        else:
            loop.remove_writer(self._fd)

    def resize(self, rows: int, cols: int) -> None:
        if self._fd is not None and not self._exited.is_set():
            set_terminal_size(self._fd, rows, cols)

    async def _wait(self, on_exit: Callable[[Terminal], None]) -> None:
        code = await self._process.wait()
        # A signal shows as a negative return code; shells report it as 128 + the signal.
        self.exit_code = code if code >= 0 else 128 - code
        self._exited.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closed.wait(), KILL_GRACE_SECONDS)
        self._stop_reading()
        for client in self._clients:
            client.end()
        self._clients.clear()
        on_exit(self)

    async def close(self) -> None:
        """Kill the terminal's process group (if it still runs) and release the terminal."""
        if not self._exited.is_set():
            await terminate_group(self.pid, self._exited, KILL_GRACE_SECONDS)
        with contextlib.suppress(asyncio.CancelledError):
            await self._waiter
        self._stop_reading()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
