"""Tool calls of one assistant message: parts through their state machine (KERNEL 3.5), each call run
as a task beside the stream, and the cleanup that leaves none unfinished."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agentforge.llm import events as ev
from agentforge.model import ids
from agentforge.model.message import AssistantMessage
from agentforge.model.part import (
    REFUSED_BY,
    CompletedTime,
    ErrorTime,
    FilePart,
    RunningTime,
    ToolPart,
    ToolStateCompleted,
    ToolStateError,
    ToolStatePending,
    ToolStateRunning,
)
from agentforge.plugins.calls import PLUGINS_EXTRA, run_tool_with_hooks
from agentforge.plugins.manager import PluginManager
from agentforge.session.events import SessionEvents, now_ms
from agentforge.session.turn_tools import INVALID_TOOL, TurnTools, is_doom_loop
from agentforge.tools.base import (
    PermissionDeniedError,
    PermissionRequest,
    ToolContext,
    ToolError,
    ToolResult,
)
from agentforge.tools.execute import run_tool
from agentforge.tools.truncation import TruncationLimits

ABORTED_MESSAGE = "Tool execution aborted"
# How long cleanup waits for cancelled tools to finish killing what they started.
ABANDON_GRACE_SECONDS = 5.0


class ToolCallRunner:
    def __init__(
        self,
        events: SessionEvents,
        message: AssistantMessage,
        tools: TurnTools,
        limits: TruncationLimits,
    ) -> None:
        self._events = events
        self._message = message
        self._tools = tools
        self._limits = limits
        self._parts: dict[str, ToolPart] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._abort = asyncio.Event()
        self.blocked = False

    def _new_part(self, call_id: str, name: str) -> ToolPart:
        part = ToolPart(
            id=ids.ascending("prt"),
            session_id=self._message.session_id,
            message_id=self._message.id,
            call_id=call_id,
            tool=name,
            state=ToolStatePending(),
        )
        self._parts[call_id] = part
        return part

    async def pending(self, call_id: str, name: str) -> None:
        if call_id in self._parts:
            return
        self._events.submit_part(self._new_part(call_id, name))

    async def start(self, call: ev.ToolCall) -> None:
        name, tool_input = self._tools.repair(call.tool_name, call.input_text)
        part = self._parts.get(call.call_id) or self._new_part(call.call_id, name)
        if not isinstance(part.state, ToolStatePending):
            return  # a duplicate tool-call event for a call already under way
        part.tool = name
        if call.metadata:
            part.metadata = {**(part.metadata or {}), **call.metadata}
        part.state = ToolStateRunning(input=tool_input, time=RunningTime(start=now_ms()))
        self._events.submit_part(part)
        self._tasks[call.call_id] = asyncio.create_task(
            self._execute(part, tool_input), name=f"tool:{name}:{call.call_id}"
        )

    def _context(self, part: ToolPart) -> ToolContext:
        async def publish_metadata(title: str | None, metadata: dict[str, Any]) -> None:
            state = part.state
            if not isinstance(state, ToolStateRunning):
                return  # only a running part accepts updates
            part.state = ToolStateRunning(
                input=state.input,
                title=title if title is not None else state.title,
                metadata=metadata,
                time=state.time,
            )
            self._events.submit_part(part)

        return ToolContext(
            session_id=self._message.session_id,
            message_id=self._message.id,
            call_id=part.call_id,
            agent=self._tools.agent,
            directory=self._tools.directory,
            data_dir=self._tools.data_dir,
            abort=self._abort,
            extra=dict(self._tools.extra),
            ask=self._tools.ask_for(self._message.id, part.call_id),
            metadata=publish_metadata,
        )

    async def _execute(self, part: ToolPart, tool_input: dict[str, Any]) -> None:
        tool = self._tools.tools.get(part.tool)
        ctx = self._context(part)
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
            if self._tools.before_run is not None:
                await self._tools.before_run(part.tool)
            plugins = self._tools.extra.get(PLUGINS_EXTRA)
            if isinstance(plugins, PluginManager):
                result = await run_tool_with_hooks(plugins, tool, tool_input, ctx, limits=self._limits)
            else:
                result = await run_tool(tool, tool_input, ctx, limits=self._limits)
        except ToolError as exc:
            refused = None
            if isinstance(exc, PermissionDeniedError):
                self.blocked = self.blocked or exc.blocks_loop
                refused = {REFUSED_BY: exc.refused_by} if exc.refused_by else None
            self._fail(part, str(exc), refused)
        else:
            self._complete(part, result)

    def _loops(self, part: ToolPart) -> bool:
        """KERNEL 5.7: this call repeats the turn's previous calls (same tool, same input) enough
        times in a row to look like a loop."""
        calls = list(self._tools.earlier_calls)
        for started in self._parts.values():
            if not isinstance(started.state, ToolStatePending):
                calls.append((started.tool, started.state.input))
            if started is part:
                break
        return part.tool != INVALID_TOOL and is_doom_loop(calls)

    def _complete(self, part: ToolPart, result: ToolResult) -> None:
        state = part.state
        if not isinstance(state, ToolStateRunning):
            return
        attachments = [
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
        part.state = ToolStateCompleted(
            input=state.input,
            output=result.output,
            title=result.title,
            metadata=result.metadata,
            time=CompletedTime(start=state.time.start, end=now_ms()),
            attachments=attachments or None,
        )
        self._events.submit_part(part)

    def _fail(self, part: ToolPart, error: str, metadata: dict[str, Any] | None = None) -> None:
        state = part.state
        if isinstance(state, ToolStateCompleted | ToolStateError):
            return
        start = state.time.start if isinstance(state, ToolStateRunning) else now_ms()
        base_metadata = state.metadata if isinstance(state, ToolStateRunning) else None
        merged = {**(base_metadata or {}), **(metadata or {})} or None
        part.state = ToolStateError(
            input=state.input,
            error=error,
            metadata=merged,
            time=ErrorTime(start=start, end=now_ms()),
        )
        self._events.submit_part(part)

    @property
    def parts(self) -> list[ToolPart]:
        return list(self._parts.values())

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
        for part in self._parts.values():
            self._fail(part, ABORTED_MESSAGE, {"interrupted": True})
