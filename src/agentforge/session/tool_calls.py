"""Tool calls of one assistant message: each call run as a task beside the stream, its part moved
through its states by the tool-part lifecycle (session/tool_part.py), and the cleanup that leaves
none unfinished."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

from agentforge.llm import events as ev
from agentforge.model import ids
from agentforge.model.message import AssistantMessage
from agentforge.model.part import REFUSED_BY, FilePart, ToolPart, ToolStateError, ToolStatePending
from agentforge.permission.errors import ExpiredError, RejectedError
from agentforge.plugins.calls import run_tool_with_hooks
from agentforge.session.events import SessionEvents
from agentforge.session.observer import NULL_OBSERVER, SessionObserver
from agentforge.session.tool_part import ToolPartLifecycle, Written
from agentforge.session.turn_tools import INVALID_TOOL, TurnTools, is_doom_loop
from agentforge.tools.base import (
    PermissionDeniedError,
    PermissionRequest,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
)
from agentforge.tools.truncation import TruncationLimits

# How long cleanup waits for cancelled tools to finish killing what they started.
ABANDON_GRACE_SECONDS = 5.0
# Plugin hooks that run code around a call (or its permission ask): with any of them, every call is
# written ahead, since what a plugin does there may have effects.
_HOOKS_AROUND_A_CALL = ("tool_execute_before", "tool_execute_after", "permission_ask")
# The start and the end of a call without effects (it runs while its start commits) wait this long
# at most for the next write to commit with them, where the writer lingers (Postgres): a quick
# read's start, its result and its step's end then commit together (bench/README.md, thirteenth
# round). Not a call with effects: it runs once its start is stored, and its result is stored as
# soon as it can be (a process killed before that recovers the call as interrupted).
CALL_LINGER: Final = 0.005


def _linger(ahead: bool) -> float:
    """How long a call's start and end may wait for company (`CALL_LINGER`); `ahead`: it has
    effects, its start written before it runs."""
    return 0.0 if ahead else CALL_LINGER


def refused_by(error: PermissionDeniedError) -> str:
    """Who refused a call, for telemetry: a rule, the fence or the workspace without asking; else the
    person asked (`user`), the deadline (`timeout`) or a policy."""
    if error.refused_by:
        return error.refused_by
    if isinstance(error, ExpiredError):
        return "timeout"
    if isinstance(error, RejectedError):
        return "user"
    return "policy"


class ToolCallRunner:
    def __init__(
        self,
        events: SessionEvents,
        message: AssistantMessage,
        tools: TurnTools,
        limits: TruncationLimits,
        *,
        observer: SessionObserver = NULL_OBSERVER,
    ) -> None:
        self._events = events
        self._observer = observer
        self._message = message
        self._tools = tools
        self._limits = limits
        self._calls: dict[str, ToolPartLifecycle] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._abort = asyncio.Event()
        self.blocked = False

    def _new_call(self, call_id: str, name: str) -> ToolPartLifecycle:
        call = ToolPartLifecycle.new(
            self._events,
            session_id=self._message.session_id,
            message_id=self._message.id,
            call_id=call_id,
            tool=name,
        )
        self._calls[call_id] = call
        return call

    async def pending(self, call_id: str, name: str) -> None:
        if call_id in self._calls:
            return
        self._new_call(call_id, name).write()

    async def start(self, call: ev.ToolCall) -> None:
        name, tool_input = self._tools.repair(call.tool_name, call.input_text)
        lifecycle = self._calls.get(call.call_id) or self._new_call(call.call_id, name)
        ahead = self._writes_ahead(self._tools.tools.get(name))
        running = lifecycle.start(tool_input, tool=name, metadata=call.metadata, linger=_linger(ahead))
        if running is None:
            return  # a duplicate tool-call event for a call already under way
        self._tasks[call.call_id] = asyncio.create_task(
            self._execute(lifecycle, tool_input, running, ahead), name=f"tool:{name}:{call.call_id}"
        )

    def _context(self, call: ToolPartLifecycle) -> ToolContext:
        async def publish_metadata(title: str | None, metadata: dict[str, Any]) -> None:
            call.progress(title, metadata)

        return ToolContext(
            session_id=self._message.session_id,
            message_id=self._message.id,
            call_id=call.part.call_id,
            agent=self._tools.agent,
            directory=self._tools.directory,
            data_dir=self._tools.data_dir,
            confinement=self._tools.confinement,
            ask=self._tools.ask_for(self._message.id, call.part.call_id),
            services=self._tools.services,
            abort=self._abort,
            metadata=publish_metadata,
        )

    async def _execute(
        self, call: ToolPartLifecycle, tool_input: dict[str, Any], running: Written, ahead: bool
    ) -> None:
        """Run the call; `ahead`: it waits for its start to be stored (`_writes_ahead`)."""
        part = call.part
        with self._observer.tool_call(
            self._events.tenant_id, part.session_id, part.message_id, part.call_id, part.tool, tool_input
        ) as observed:
            try:
                # Write-ahead: a call's effects never happen before the store knows it runs, so a
                # process killed mid-call leaves the call in the history (recovered as interrupted).
                # A call without effects has nothing to protect: it runs while its start commits
                # (its result is written after it: the writer keeps order).
                tool = self._tools.tools.get(part.tool)
                if not ahead or await self._recorded(call, running):
                    refused = await self._run(call, tool, tool_input, _linger(ahead))
                else:
                    refused = None
            except asyncio.CancelledError:
                observed.finish("interrupted")
                raise
            state = call.part.state
            error = state.error if isinstance(state, ToolStateError) else None
            observed.finish(state.status, refused_by=refused, error=error)

    def _writes_ahead(self, tool: Tool[Any] | None) -> bool:
        """Whether the call must wait for its start to be stored: it may have effects, or a plugin
        runs code around it (its hooks may have effects of their own)."""
        return tool is None or tool.has_effects or self._hooked()

    def _may_write_files(self, tool: Tool[Any]) -> bool:
        """Whether the call may change the workspace's files (it waits for the step's snapshot):
        the tool may, or a plugin runs code around it (which may)."""
        return tool.changes_files or self._hooked()

    def _hooked(self) -> bool:
        plugins = self._tools.plugins
        return any(plugins.implements(hook) for hook in _HOOKS_AROUND_A_CALL)

    @staticmethod
    async def _recorded(call: ToolPartLifecycle, running: Written) -> bool:
        """Whether the running state is stored; if its write failed, the call fails unrun."""
        try:
            await asyncio.shield(running)
        except Exception as exc:
            call.fail(f"the call was not run: its start could not be stored ({exc})", None)
            return False
        return True

    async def _run(
        self, call: ToolPartLifecycle, tool: Tool[Any] | None, tool_input: dict[str, Any], linger: float
    ) -> str | None:
        """Run the call to its final state, written with `linger`; returns who refused it, if it
        was refused."""
        part = call.part
        ctx = self._context(call)
        try:
            if tool is None:
                raise ToolError(f"Unknown tool: {part.tool}")
            if self._loops(part):
                await ctx.ask(
                    PermissionRequest(
                        permission="doom_loop",
                        patterns=[part.tool],
                        always=[part.tool],
                        metadata={"tool": part.tool, "input": tool_input},
                    )
                )
            if self._tools.before_run is not None and self._may_write_files(tool):
                await self._tools.before_run()
            plugins, limits = self._tools.plugins, self._limits
            result = await run_tool_with_hooks(plugins, tool, tool_input, ctx, limits=limits)
        except ToolError as exc:
            refused = None
            if isinstance(exc, PermissionDeniedError):
                self.blocked = self.blocked or exc.blocks_loop
                refused = {REFUSED_BY: exc.refused_by} if exc.refused_by else None
            call.fail(str(exc), refused, linger=linger)
            return refused_by(exc) if isinstance(exc, PermissionDeniedError) else None
        call.complete(
            result.output,
            title=result.title,
            metadata=result.metadata,
            attachments=self._attachments(part, result),
            linger=linger,
        )
        return None

    def _loops(self, part: ToolPart) -> bool:
        """KERNEL 5.7: this call repeats the turn's previous calls (same tool, same input) enough
        times in a row to look like a loop."""
        calls = list(self._tools.earlier_calls)
        for started in self.parts:
            if not isinstance(started.state, ToolStatePending):
                calls.append((started.tool, started.state.input))
            if started is part:
                break
        return part.tool != INVALID_TOOL and is_doom_loop(calls)

    @staticmethod
    def _attachments(part: ToolPart, result: ToolResult) -> list[FilePart]:
        return [
            FilePart(
                id=ids.ascending("prt"),
                session_id=part.session_id,
                message_id=part.message_id,
                mime=item.mime,
                url=item.url,
                filename=item.filename,
            )
            for item in result.attachments
        ]

    @property
    def parts(self) -> list[ToolPart]:
        return [call.part for call in self._calls.values()]

    async def settle(self) -> None:
        """Wait for every started call to finish (their results belong to the current step)."""
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def abandon(self) -> None:
        """Cancel calls still running and mark every unfinished call as interrupted."""
        self._abort.set()
        # Calls waiting for a person are rejected first, so their requests say why they ended.
        self._tools.reject_waiting()
        running = [task for task in self._tasks.values() if not task.done()]
        for task in running:
            task.cancel()
        if running:
            with contextlib.suppress(Exception):
                await asyncio.wait(running, timeout=ABANDON_GRACE_SECONDS)
        for call in self._calls.values():
            call.interrupt()
