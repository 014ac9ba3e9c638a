"""One runner per session (KERNEL 4.3): shared runs, shielded callers, cancellation, idle and crash hooks."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import pytest

from agentforge.session.runner import RunHandle, RunnerRegistry, SessionBusyError


@dataclass
class FakeLoop:
    """A loop body that records what happened to it; `gate` holds it until the test lets it finish."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    starts: int = 0
    finished: int = 0
    cleaned_up: int = 0
    crash_with: Exception | None = None
    idle_calls: int = 0
    crashes: list[BaseException] = field(default_factory=list)
    order: list[str] = field(default_factory=list)

    async def body(self, _run: RunHandle) -> None:
        self.starts += 1
        self.started.set()
        try:
            await self.gate.wait()
            if self.crash_with is not None:
                raise self.crash_with
            self.finished += 1
        finally:
            # Cleanup that itself awaits (yields to the event loop), like the processor's final writes.
            await asyncio.sleep(0)
            self.cleaned_up += 1
            self.order.append("cleanup")

    def on_idle(self) -> None:
        self.idle_calls += 1
        self.order.append("idle")

    async def on_crash(self, exc: BaseException) -> None:
        self.crashes.append(exc)
        self.order.append("crash")

    async def ensure(self, registry: RunnerRegistry, session_id: str = "ses_1") -> None:
        await registry.ensure_running(session_id, self.body, on_idle=self.on_idle, on_crash=self.on_crash)


async def _cancel_and_wait(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def test_concurrent_callers_share_one_run() -> None:
    registry = RunnerRegistry()
    loop = FakeLoop()
    callers = [asyncio.create_task(loop.ensure(registry)) for _ in range(5)]
    # The loop task is created by the first caller, after the other callers were scheduled: once it
    # has started, every caller has passed the point where it would have started its own.
    await asyncio.wait_for(loop.started.wait(), 1)
    assert loop.starts == 1, "the loop factory runs once however many callers arrive"
    assert registry.is_busy("ses_1")
    assert not any(c.done() for c in callers), "every caller waits for the run to end"

    loop.gate.set()
    await asyncio.wait_for(asyncio.gather(*callers), 1)
    assert (loop.starts, loop.finished, loop.idle_calls) == (1, 1, 1)
    assert not registry.is_busy("ses_1")


async def test_a_finished_run_lets_the_next_caller_start_a_new_one() -> None:
    registry = RunnerRegistry()
    loop = FakeLoop()
    loop.gate.set()
    await asyncio.wait_for(loop.ensure(registry), 1)
    await asyncio.wait_for(loop.ensure(registry), 1)
    assert loop.starts == 2 and loop.idle_calls == 2


async def test_sessions_run_independently() -> None:
    registry = RunnerRegistry()
    first, second = FakeLoop(), FakeLoop()
    a = asyncio.create_task(first.ensure(registry, "ses_a"))
    b = asyncio.create_task(second.ensure(registry, "ses_b"))
    await asyncio.wait_for(asyncio.gather(first.started.wait(), second.started.wait()), 1)
    second.gate.set()
    await asyncio.wait_for(b, 1)
    assert registry.is_busy("ses_a") and not registry.is_busy("ses_b")
    first.gate.set()
    await asyncio.wait_for(a, 1)
    assert not registry.is_busy("ses_a")


async def test_a_cancelled_caller_does_not_cancel_the_run() -> None:
    registry = RunnerRegistry()
    loop = FakeLoop()
    leaving = asyncio.create_task(loop.ensure(registry))
    staying = asyncio.create_task(loop.ensure(registry))
    await asyncio.wait_for(loop.started.wait(), 1)

    leaving.cancel()  # e.g. the HTTP client went away
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert registry.is_busy("ses_1")

    loop.gate.set()
    await asyncio.wait_for(staying, 1)
    # The loop ran to its end (a cancelled one would not count as finished) and the caller that
    # stayed got its result.
    assert loop.finished == 1 and loop.idle_calls == 1 and loop.crashes == []


async def test_cancel_interrupts_the_run_and_waits_for_its_cleanup() -> None:
    registry = RunnerRegistry()
    loop = FakeLoop()
    caller = asyncio.create_task(loop.ensure(registry))
    await asyncio.wait_for(loop.started.wait(), 1)

    assert await asyncio.wait_for(registry.cancel("ses_1"), 1) is True
    # By the time cancel returns, the loop's own cleanup and the idle hook have run.
    assert loop.finished == 0 and loop.cleaned_up == 1
    assert loop.order == ["cleanup", "idle"]
    assert not registry.is_busy("ses_1")
    # Callers waiting on the run return normally (they then read the latest reply).
    await asyncio.wait_for(caller, 1)
    assert loop.crashes == []


async def test_cancel_without_a_run_is_a_no_op() -> None:
    registry = RunnerRegistry()
    assert await registry.cancel("ses_idle") is False


async def test_cancel_right_after_start_still_finishes_the_run() -> None:
    """An abort that lands before the loop task took its first step must not hang or leave it busy."""
    registry = RunnerRegistry()
    loop = FakeLoop()
    caller = asyncio.create_task(loop.ensure(registry))
    await asyncio.sleep(0)  # the caller has created the loop task, which has not run yet
    assert registry.is_busy("ses_1") and loop.starts == 0
    try:
        # Not wait_for: that would run `cancel` in a new task, after the loop task's first step.
        async with asyncio.timeout(1):
            assert await registry.cancel("ses_1") is True
        assert not registry.is_busy("ses_1")
        assert loop.idle_calls == 1
        await asyncio.wait_for(caller, 1)
    finally:
        await _cancel_and_wait(caller)


async def test_cancel_all_stops_every_session() -> None:
    registry = RunnerRegistry()
    loops = [FakeLoop() for _ in range(3)]
    callers = [asyncio.create_task(lp.ensure(registry, f"ses_{i}")) for i, lp in enumerate(loops)]
    await asyncio.wait_for(asyncio.gather(*(lp.started.wait() for lp in loops)), 1)
    await asyncio.wait_for(registry.cancel_all(), 1)
    assert [lp.cleaned_up for lp in loops] == [1, 1, 1]
    assert not any(registry.is_busy(f"ses_{i}") for i in range(3))
    await asyncio.wait_for(asyncio.gather(*callers), 1)


async def test_a_crashing_loop_reports_then_goes_idle() -> None:
    registry = RunnerRegistry()
    loop = FakeLoop(crash_with=ValueError("model exploded"))
    callers = [asyncio.create_task(loop.ensure(registry)) for _ in range(2)]
    await asyncio.wait_for(loop.started.wait(), 1)
    loop.gate.set()
    await asyncio.wait_for(asyncio.gather(*callers), 1)  # callers do not see the exception
    assert len(loop.crashes) == 1 and str(loop.crashes[0]) == "model exploded"
    assert loop.order == ["cleanup", "crash", "idle"]
    assert not registry.is_busy("ses_1")


async def test_assert_not_busy_raises_while_a_run_is_active() -> None:
    registry = RunnerRegistry()
    registry.assert_not_busy("ses_1")
    loop = FakeLoop()
    caller = asyncio.create_task(loop.ensure(registry))
    await asyncio.wait_for(loop.started.wait(), 1)
    with pytest.raises(SessionBusyError) as raised:
        registry.assert_not_busy("ses_1")
    assert raised.value.session_id == "ses_1"
    assert "ses_1" in str(raised.value)
    registry.assert_not_busy("ses_other")
    loop.gate.set()
    await asyncio.wait_for(caller, 1)
    registry.assert_not_busy("ses_1")


async def test_input_noted_while_a_run_goes_reaches_that_runs_handle() -> None:
    registry = RunnerRegistry()
    handles: list[RunHandle] = []
    started, gate = asyncio.Event(), asyncio.Event()

    async def body(run: RunHandle) -> None:
        handles.append(run)
        started.set()
        await gate.wait()

    before: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    assert registry.note_input("ses_1", before) == 1  # no run yet: kept for the run that starts next
    loop = FakeLoop()
    task = asyncio.create_task(
        registry.ensure_running("ses_1", body, on_idle=loop.on_idle, on_crash=loop.on_crash)
    )
    await asyncio.wait_for(started.wait(), 1)
    (handle,) = handles
    assert handle.inputs == [before]  # its first read waits for that message
    assert handle.take_new_input()
    assert not handle.take_new_input()
    before.set_result(None)
    await handle.inputs_written()

    written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    assert registry.note_input("ses_1", written) == 2
    registry.note_input("ses_2")  # another session's input is not this run's
    assert handle.take_new_input()
    assert not handle.take_new_input()  # taken once
    assert handle.inputs == [written]
    written.set_result(None)
    await handle.inputs_written()
    assert handle.inputs == []

    gate.set()
    await asyncio.wait_for(task, 1)


async def test_what_is_noted_for_sessions_without_a_run_is_kept_for_so_many_sessions() -> None:
    registry = RunnerRegistry(unstarted=2)
    for session_id in ("ses_1", "ses_2", "ses_1", "ses_3"):  # ses_2 is now the oldest noted
        registry.note_input(session_id)
    handles: dict[str, RunHandle] = {}

    async def body(run: RunHandle) -> None:
        handles[run_for] = run

    loop = FakeLoop()
    for run_for in ("ses_1", "ses_2", "ses_3"):
        await registry.ensure_running(run_for, body, on_idle=loop.on_idle, on_crash=loop.on_crash)

    assert [handles[s].noted for s in ("ses_1", "ses_2", "ses_3")] == [2, 0, 1]
