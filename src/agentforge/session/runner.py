"""One runner per session (KERNEL 4.3): concurrent prompts share one loop; abort cancels it.

A run is an `asyncio.Task` plus a future that every caller awaits through `shield`, so a caller that
goes away (a dropped HTTP client) never cancels the loop; only `cancel` does. The loop gets its run's
`RunHandle` when it starts: user messages stored while it runs are noted there (`note_input`), and
the loop reads them from its handle instead of looking itself up in the registry.

A session may instead run a user's shell command (the Shell state). It is only started on an idle
session; a prompt arriving meanwhile queues its run behind it (ShellThenRun). Aborting a shell sets
its abort event, so the command is killed and its part still completed.

Across replicas (several servers on one Postgres) a run or shell also holds the session's run lease
(`RunLeases`, runtime/cluster.py): a prompt arriving where the lease is held elsewhere tells the
owner about its message and waits for that run to end, like a prompt joining a local run; abort is
forwarded to the owner; a shell is refused as busy. In one process the leases are always granted.
A prompt to an idle session starts taking the lease while its user message is written
(`LeaseAhead`): the run it starts keeps that hold instead of taking the lease after the write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from agentforge.model.message import WithParts

log = logging.getLogger(__name__)

# A loop, given its run's handle, returns its final assistant message as written (None: it wrote none).
LoopFactory = Callable[["RunHandle"], Coroutine[Any, Any, "WithParts | None"]]
OnIdle = Callable[[], None]
OnCrash = Callable[[BaseException], Coroutine[Any, Any, None]]
T = TypeVar("T")
ShellWork = Callable[[asyncio.Event], Coroutine[Any, Any, T]]


class ShuttingDownError(Exception):
    """The server is draining for shutdown: it finishes the turns it runs and starts no new one."""

    def __init__(self) -> None:
        super().__init__("The server is shutting down and accepts no new turns; retry on another instance")


class RunLeases(Protocol):
    """One run per session cluster-wide (runtime/cluster.py); `LocalLeases` for one process.
    `shared`: other replicas may run the session and write to it, so what is read before the lease
    is held may miss their last writes."""

    shared: bool

    def holds(self, session_id: str) -> bool:
        """Whether this process holds the session's lease now (a lease connection that ended took
        every hold with it)."""
        ...

    async def acquire(self, session_id: str, tenant_id: str | None = None) -> bool:
        """Take the session's lease unless another replica holds it (`tenant_id`: known as the
        session's runner on every replica)."""
        ...

    async def release(self, session_id: str) -> None:
        """Give it back, once the run's writes are durable."""
        ...

    async def held_elsewhere(self, session_id: str) -> bool: ...

    async def tell_input(self, session_id: str) -> None:
        """Tell the owner a user message for its run was stored."""
        ...

    async def tell_abort(self, session_id: str) -> None: ...

    async def wait_released(self, session_id: str, timeout: float | None = None) -> bool:
        """Wait until no replica holds the lease; False on timeout."""
        ...


class LocalLeases:
    """One process: the registry alone decides."""

    shared = False

    def holds(self, session_id: str) -> bool:
        return True

    async def acquire(self, session_id: str, tenant_id: str | None = None) -> bool:
        return True

    async def release(self, session_id: str) -> None:
        return None

    async def held_elsewhere(self, session_id: str) -> bool:
        return False

    async def tell_input(self, session_id: str) -> None:
        return None

    async def tell_abort(self, session_id: str) -> None:
        return None

    async def wait_released(self, session_id: str, timeout: float | None = None) -> bool:
        return True


# Sessions whose next run's handle is kept (`note_input`): one is needed for the milliseconds between
# a prompt's message and its run's start; a session past the bound starts its next run on a new one.
UNSTARTED_HANDLES: Final = 10_000


class SessionBusyError(Exception):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session {session_id} is busy")
        self.session_id = session_id


@dataclass(slots=True)
class RunHandle:
    """What a running loop learns from outside: user messages stored while it runs. It must then
    re-read history, after waiting for their writes (they may still be queued when it checks)."""

    new_input: bool = False
    inputs: list[asyncio.Future[Any]] = field(default_factory=list)
    noted: int = 0  # user messages noted so far (a read taken before can tell whether it missed one)

    def note_input(self, written: asyncio.Future[Any] | None = None) -> None:
        """A user message was submitted; `written` resolves once it is durable."""
        self.new_input = True
        self.noted += 1
        if written is not None:
            self.inputs.append(written)

    async def inputs_written(self) -> None:
        """Wait until every user message noted so far is durable (before re-reading history)."""
        if not self.inputs:
            return
        pending, self.inputs = self.inputs, []
        await asyncio.gather(*pending, return_exceptions=True)

    def take_new_input(self) -> bool:
        """Whether a user message arrived since the last call (and forget it)."""
        if not self.new_input:
            return False
        self.new_input = False
        return True


@dataclass(slots=True)
class _Run:
    task: asyncio.Task[WithParts | None]
    done: asyncio.Future[WithParts | None]
    handle: RunHandle


@dataclass(slots=True)
class _Shell:
    task: asyncio.Task[Any]
    abort: asyncio.Event


class LeaseAhead:
    """A hold on a session's run lease, taken while a prompt's user message is written (leases
    shared by replicas: taking one is a Postgres round trip the run would otherwise wait for after
    the write). The run started with it keeps the hold (`RunnerRegistry.ensure_running`); else
    `drop` gives it back once got."""

    def __init__(self, registry: RunnerRegistry, session_id: str, tenant_id: str | None) -> None:
        self._registry = registry
        self._session_id = session_id
        self._taking = asyncio.ensure_future(registry.leases.acquire(session_id, tenant_id))
        self._taking.add_done_callback(_retrieve)
        self._settled = False  # kept by a run, or given back

    async def held(self) -> bool:
        """Whether the hold was got and is held now (False also when taking it failed)."""
        try:
            taken = await asyncio.shield(self._taking)
        except Exception:
            return False
        return taken and self._registry.leases.holds(self._session_id)

    async def keep(self) -> bool | None:
        """For the run about to start: True when got and still held (the run keeps the hold), False
        when another replica holds the lease, None when taking it failed or the hold ended with its
        connection meanwhile (take it the usual way)."""
        try:
            taken = await asyncio.shield(self._taking)
        except asyncio.CancelledError:
            self.drop()
            raise
        except Exception:
            taken = None
        self._settled = True
        if taken and not self._registry.leases.holds(self._session_id):
            self._registry._give_back(self._session_id)  # the ended hold, counted off (a no-op there)
            return None
        return taken

    def drop(self) -> None:
        """Give the hold back once got, unless a run kept it."""
        if self._settled:
            return
        self._settled = True
        self._taking.add_done_callback(self._give_back)

    def _give_back(self, taking: asyncio.Future[bool]) -> None:
        if not taking.cancelled() and taking.exception() is None and taking.result():
            self._registry._give_back(self._session_id)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """A failure nobody asks about is no error (the usual way takes the lease again and sees it)."""
    if not future.cancelled():
        future.exception()


class RunnerRegistry:
    def __init__(self, leases: RunLeases | None = None, *, unstarted: int = UNSTARTED_HANDLES) -> None:
        self._runs: dict[str, _Run] = {}
        self._shells: dict[str, _Shell] = {}
        self.accepting = True
        self.leases: RunLeases = leases or LocalLeases()
        # Sessions whose lease is being taken: a second local caller waits instead of taking it too.
        self._acquiring: dict[str, asyncio.Future[bool]] = {}
        self._releasing: set[asyncio.Task[None]] = set()
        # What was noted for sessions with no run, for the run that starts next (`note_input`), for
        # `unstarted` sessions at most.
        self._unstarted: dict[str, RunHandle] = {}
        self._keep_unstarted = unstarted
        # Awaited before a lease is given back (the store's barrier: the run's writes are durable).
        self.before_release: Callable[[], Coroutine[Any, Any, None]] | None = None

    def admit(self) -> None:
        """Raise ShuttingDownError once the server drains; callers check before storing anything."""
        if not self.accepting:
            raise ShuttingDownError()

    def stop_accepting(self) -> None:
        """Start draining: running loops and shells go on, new ones are refused."""
        self.accepting = False

    async def wait_idle(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for every run and shell to end; whether they all did."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._runs or self._shells:
            left = deadline - loop.time()
            if left <= 0:
                return False
            waits: list[asyncio.Future[Any]] = [run.done for run in self._runs.values()]
            waits += [shell.task for shell in self._shells.values()]
            await asyncio.wait(waits, timeout=left)
        return True

    @property
    def running(self) -> int:
        """Sessions running a loop or a shell command now."""
        return len(self._runs.keys() | self._shells.keys())

    def is_busy(self, session_id: str) -> bool:
        return session_id in self._runs or session_id in self._shells

    def lease_ahead(self, session_id: str, tenant_id: str | None = None) -> LeaseAhead | None:
        """Start taking the lease of an idle session whose prompt's message is being written, for the
        run that follows (None: no replicas, where the lease is no round trip, or a run is on)."""
        if not self.leases.shared or self.is_busy(session_id):
            return None
        return LeaseAhead(self, session_id, tenant_id)

    def assert_not_busy(self, session_id: str) -> None:
        if self.is_busy(session_id):
            raise SessionBusyError(session_id)

    async def ensure_running(
        self,
        session_id: str,
        start: LoopFactory,
        *,
        on_idle: OnIdle,
        on_crash: OnCrash,
        tenant_id: str | None = None,
        lease: LeaseAhead | None = None,
    ) -> WithParts | None:
        """Start the loop unless one is running; either way wait for the running one to end.
        `lease`: a hold taken ahead, which a loop started here keeps (else the caller drops it).

        Returns the loop's final assistant message (None when it was cancelled or failed, or when
        it ran on another replica: the caller then reads the reply from the store)."""
        while True:
            run = self._runs.get(session_id)
            if run is not None:
                return await asyncio.shield(run.done)
            self.admit()  # a running loop may still take input; a new one may not start
            shell = self._shells.get(session_id)
            if shell is not None:  # the run queues behind the shell, with a hold of its own
                if not await self.leases.acquire(session_id, tenant_id):  # re-entrant: held here
                    continue
                if session_id in self._runs:  # another caller queued one meanwhile: join it
                    self._give_back(session_id)
                    continue
                run = self._start(session_id, _after(shell.task, start), on_idle, on_crash, leased=True)
                return await asyncio.shield(run.done)
            taken = await self._take_lease(session_id, tenant_id, lease)
            lease = None
            if taken is None:
                continue  # another local caller took it: join what it started
            if taken:
                run = self._start(session_id, start, on_idle, on_crash, leased=True)
                return await asyncio.shield(run.done)
            # Running on another replica: its loop re-reads history; wait for that run to end.
            await self.leases.tell_input(session_id)
            await self.leases.wait_released(session_id)
            return None

    async def _take_lease(
        self, session_id: str, tenant_id: str | None = None, ahead: LeaseAhead | None = None
    ) -> bool | None:
        """True: taken (or kept from `ahead`); False: held by another replica; None: a local caller
        was taking it (`ahead` is then left to its caller)."""
        pending = self._acquiring.get(session_id)
        if pending is not None:
            await asyncio.shield(pending)
            return None
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._acquiring[session_id] = future
        taken = False
        try:
            kept = None if ahead is None else await ahead.keep()
            taken = kept if kept is not None else await self.leases.acquire(session_id, tenant_id)
        finally:
            del self._acquiring[session_id]
            future.set_result(taken)
        return taken

    async def is_busy_anywhere(self, session_id: str) -> bool:
        """Busy here, or running on another replica."""
        return self.is_busy(session_id) or await self.leases.held_elsewhere(session_id)

    async def assert_idle_anywhere(self, session_id: str) -> None:
        if await self.is_busy_anywhere(session_id):
            raise SessionBusyError(session_id)

    async def run_shell(
        self, session_id: str, work: ShellWork[T], *, on_idle: OnIdle, tenant_id: str | None = None
    ) -> T:
        """Run `work(abort)` as the session's shell; refused unless the session is idle.

        `work` must finish promptly once `abort` is set. `on_idle` runs when it ends, unless a run
        was queued behind it meanwhile (that run takes the session over)."""
        self.admit()
        if self.is_busy(session_id) or self._acquiring.get(session_id) is not None:
            raise SessionBusyError(session_id)
        if not await self._take_lease(session_id, tenant_id):
            raise SessionBusyError(session_id)
        if self.is_busy(session_id):  # a local run started meanwhile (it holds the lease too)
            self._give_back(session_id)
            raise SessionBusyError(session_id)
        abort = asyncio.Event()
        task = asyncio.create_task(work(abort), name=f"shell:{session_id}")
        shell = _Shell(task=task, abort=abort)
        self._shells[session_id] = shell

        def finished(_task: asyncio.Task[Any]) -> None:
            if self._shells.get(session_id) is shell:
                del self._shells[session_id]
            self._give_back(session_id)
            if session_id not in self._runs:
                try:
                    on_idle()
                except Exception:
                    log.exception("session %s: on_idle failed", session_id)

        task.add_done_callback(finished)
        result: T = await asyncio.shield(task)
        return result

    def _give_back(self, session_id: str) -> None:
        """Release one hold on the lease once what was written before now is durable."""

        async def release() -> None:
            try:
                if self.before_release is not None:
                    await self.before_release()
            finally:
                await self.leases.release(session_id)

        task = asyncio.get_running_loop().create_task(release(), name=f"release:{session_id}")
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    def _start(
        self,
        session_id: str,
        start: LoopFactory,
        on_idle: OnIdle,
        on_crash: OnCrash,
        *,
        leased: bool = False,
    ) -> _Run:
        done: asyncio.Future[WithParts | None] = asyncio.get_running_loop().create_future()
        handle = self._unstarted.pop(session_id, None) or RunHandle()

        async def guarded() -> WithParts | None:
            try:
                return await start(handle)
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
            if leased:
                self._give_back(session_id)
            try:
                on_idle()
            except Exception:
                log.exception("session %s: on_idle failed", session_id)
            result = None if task.cancelled() or task.exception() is not None else task.result()
            if not done.done():
                done.set_result(result)

        run = _Run(task=asyncio.create_task(guarded(), name=f"loop:{session_id}"), done=done, handle=handle)
        run.task.add_done_callback(finished)
        self._runs[session_id] = run
        return run

    def note_input(self, session_id: str, written: asyncio.Future[Any] | None = None) -> int:
        """A user message for this session was submitted; `written` resolves once it is durable.
        The session's running loop, if any, finds it on its handle; with none, the handle of the run
        that starts next does (two prompts to an idle session: the second's message may be written
        before the first's run starts, whose first read must then wait for it and see it). Returns
        the count of messages noted on that handle so far (`RunHandle.noted`).

        Call it as soon as the write is queued, not after it commits: a loop checking for new input
        in between would otherwise end without answering it."""
        run = self._runs.get(session_id)
        handle = run.handle if run is not None else self._next_handle(session_id)
        handle.note_input(written)
        return handle.noted

    def _next_handle(self, session_id: str) -> RunHandle:
        """The handle the session's next run starts with, noting what arrives before it starts."""
        handle = self._unstarted.pop(session_id, None) or RunHandle()
        handle.inputs = [written for written in handle.inputs if not written.done()]
        self._unstarted[session_id] = handle  # the newest last: the oldest go first past the bound
        while len(self._unstarted) > self._keep_unstarted:
            del self._unstarted[next(iter(self._unstarted))]
        return handle

    async def cancel(self, session_id: str) -> bool:
        """Interrupt the running (or queued) loop and the shell, and wait until both have ended."""
        run = self._runs.get(session_id)
        shell = self._shells.get(session_id)
        if run is None and shell is None:
            return False
        waits: list[asyncio.Future[Any]] = []
        if run is not None:
            run.task.cancel()
            waits.append(run.done)
        if shell is not None:
            shell.abort.set()
            waits.append(shell.task)
        await asyncio.wait(waits)
        return True

    async def abort(self, session_id: str, *, timeout: float = 10.0) -> bool:
        """Cancel the session's run here, or ask the replica running it and wait for it to end."""
        if await self.cancel(session_id):
            return True
        if not await self.leases.held_elsewhere(session_id):
            return False
        await self.leases.tell_abort(session_id)
        await self.leases.wait_released(session_id, timeout)
        return True

    async def cancel_all(self) -> None:
        sessions = set(self._runs) | set(self._shells)
        await asyncio.gather(*(self.cancel(sid) for sid in sessions))
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)


def _after(shell: asyncio.Task[Any], start: LoopFactory) -> LoopFactory:
    """`start`, once the shell has ended (however it ended)."""

    async def queued(handle: RunHandle) -> WithParts | None:
        await asyncio.wait({shell})
        handle.note_input()  # the shell wrote its messages meanwhile: a history read before is stale
        return await start(handle)

    return queued
