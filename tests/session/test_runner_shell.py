"""The runner's Shell and ShellThenRun states (KERNEL 4.3): a shell only starts on an idle session,
a run asked for meanwhile waits for it, and cancel ends both."""

from __future__ import annotations

import asyncio

import pytest

from agentforge.model.message import WithParts
from agentforge.session.runner import RunHandle, RunnerRegistry, SessionBusyError


class Shell:
    """Shell work that runs until released or aborted, and says which happened (also in `order`)."""

    def __init__(self, order: list[str] | None = None) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.order = order if order is not None else []

    async def work(self, abort: asyncio.Event) -> str:
        self.started.set()
        released = asyncio.create_task(self.release.wait())
        aborted = asyncio.create_task(abort.wait())
        done, pending = await asyncio.wait({released, aborted}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        outcome = "aborted" if aborted in done else "finished"
        self.order.append(f"shell {outcome}")
        return outcome


async def _never_crashes(_exc: BaseException) -> None:
    raise AssertionError("no run should crash here")


async def test_a_shell_returns_its_result_and_goes_idle() -> None:
    registry = RunnerRegistry()
    idle: list[str] = []
    shell = Shell()
    shell.release.set()
    result = await registry.run_shell("ses_1", shell.work, on_idle=lambda: idle.append("ses_1"))
    assert result == "finished"
    assert idle == ["ses_1"] and not registry.is_busy("ses_1")


async def test_a_shell_is_refused_while_a_run_or_another_shell_is_going() -> None:
    registry = RunnerRegistry()
    gate = asyncio.Event()

    async def loop(_run: RunHandle) -> WithParts | None:
        await gate.wait()
        return None

    run = asyncio.create_task(
        registry.ensure_running("ses_1", loop, on_idle=lambda: None, on_crash=_never_crashes)
    )
    await asyncio.sleep(0)
    with pytest.raises(SessionBusyError):
        await registry.run_shell("ses_1", Shell().work, on_idle=lambda: None)
    gate.set()
    await run

    first = Shell()
    running = asyncio.create_task(registry.run_shell("ses_1", first.work, on_idle=lambda: None))
    await first.started.wait()
    assert registry.is_busy("ses_1")
    with pytest.raises(SessionBusyError):
        await registry.run_shell("ses_1", Shell().work, on_idle=lambda: None)
    first.release.set()
    assert await running == "finished"


async def test_a_run_asked_for_during_a_shell_starts_after_it() -> None:
    registry = RunnerRegistry()
    order: list[str] = []
    shell = Shell(order)

    async def loop(_run: RunHandle) -> WithParts | None:
        order.append("run")
        return None

    shell_task = asyncio.create_task(
        registry.run_shell("ses_1", shell.work, on_idle=lambda: order.append("shell idle"))
    )
    await shell.started.wait()
    run = asyncio.create_task(
        registry.ensure_running(
            "ses_1", loop, on_idle=lambda: order.append("run idle"), on_crash=_never_crashes
        )
    )
    await asyncio.sleep(0)  # the run is asked for (one turn of the event loop, no timer)
    shell.release.set()
    assert await shell_task == "finished"
    await run
    # The run started only once the shell had ended, and the shell handed the session to it
    # instead of going idle.
    assert order == ["shell finished", "run", "run idle"]
    assert not registry.is_busy("ses_1")


async def test_cancel_aborts_the_shell_and_drops_the_queued_run() -> None:
    registry = RunnerRegistry()
    shell = Shell()
    ran: list[str] = []

    async def loop(_run: RunHandle) -> WithParts | None:
        ran.append("run")
        return None

    shell_task = asyncio.create_task(registry.run_shell("ses_1", shell.work, on_idle=lambda: None))
    await shell.started.wait()
    run = asyncio.create_task(
        registry.ensure_running("ses_1", loop, on_idle=lambda: None, on_crash=_never_crashes)
    )
    await asyncio.sleep(0)
    assert await registry.cancel("ses_1") is True
    assert await shell_task == "aborted"
    assert await run is None
    assert ran == [] and not registry.is_busy("ses_1")


async def test_cancel_all_aborts_shells() -> None:
    registry = RunnerRegistry()
    shell = Shell()
    shell_task = asyncio.create_task(registry.run_shell("ses_9", shell.work, on_idle=lambda: None))
    await shell.started.wait()
    await registry.cancel_all()
    assert await shell_task == "aborted"
