"""One runner per session (KERNEL 4.3): concurrent prompts share one loop; abort cancels it.

A run is an `asyncio.Task` plus a future that every caller awaits through `shield`, so a caller that
goes away (a dropped HTTP client) never cancels the loop; only `cancel` does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from agentforge.model.message import WithParts

log = logging.getLogger(__name__)

# A loop returns its final assistant message as written (None when it wrote none).
LoopFactory = Callable[[], Coroutine[Any, Any, "WithParts | None"]]
OnIdle = Callable[[], None]
OnCrash = Callable[[BaseException], Coroutine[Any, Any, None]]


class SessionBusyError(Exception):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session {session_id} is busy")
        self.session_id = session_id


@dataclass(slots=True)
class _Run:
    task: asyncio.Task[WithParts | None]
    done: asyncio.Future[WithParts | None]
    # Set when a user message is stored while this run is going: the loop must re-read history.
    new_input: bool = False


class RunnerRegistry:
    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    def is_busy(self, session_id: str) -> bool:
        return session_id in self._runs

    def assert_not_busy(self, session_id: str) -> None:
        if self.is_busy(session_id):
            raise SessionBusyError(session_id)

    async def ensure_running(
        self, session_id: str, start: LoopFactory, *, on_idle: OnIdle, on_crash: OnCrash
    ) -> WithParts | None:
        """Start the loop unless one is running; either way wait for the running one to end.

        Returns the loop's final assistant message (None when it was cancelled or failed)."""
        run = self._runs.get(session_id)
        if run is None:
            run = self._start(session_id, start, on_idle, on_crash)
        return await asyncio.shield(run.done)

    def _start(self, session_id: str, start: LoopFactory, on_idle: OnIdle, on_crash: OnCrash) -> _Run:
        done: asyncio.Future[WithParts | None] = asyncio.get_running_loop().create_future()

        async def guarded() -> WithParts | None:
            try:
                return await start()
            except asyncio.CancelledError:
                log.info("session %s: loop cancelled", session_id)
            except Exception as exc:
                log.exception("session %s: loop failed", session_id)
                await on_crash(exc)
            return None

        def finished(task: asyncio.Task[WithParts | None]) -> None:
            # A done-callback, not a `finally`: it also runs for a task cancelled before it started.
            if self._runs.get(session_id) is run:
                del self._runs[session_id]
            try:
                on_idle()
            except Exception:
                log.exception("session %s: on_idle failed", session_id)
            result = None if task.cancelled() or task.exception() is not None else task.result()
            if not done.done():
                done.set_result(result)

        run = _Run(task=asyncio.create_task(guarded(), name=f"loop:{session_id}"), done=done)
        run.task.add_done_callback(finished)
        self._runs[session_id] = run
        return run

    def note_input(self, session_id: str) -> None:
        run = self._runs.get(session_id)
        if run is not None:
            run.new_input = True

    def take_new_input(self, session_id: str) -> bool:
        """Whether a user message arrived since the last call (and forget it)."""
        run = self._runs.get(session_id)
        if run is None or not run.new_input:
            return False
        run.new_input = False
        return True

    async def cancel(self, session_id: str) -> bool:
        """Interrupt the running loop and wait until its cleanup has finished."""
        run = self._runs.get(session_id)
        if run is None:
            return False
        run.task.cancel()
        await asyncio.shield(run.done)
        return True

    async def cancel_all(self) -> None:
        await asyncio.gather(*(self.cancel(sid) for sid in list(self._runs)))
