"""Subagents: the session side of the `task` tool (KERNEL 8.3), and subtask parts (KERNEL 4.7).

`SessionSubagents` implements the task tool's `Subagents` protocol: it opens child sessions and
runs a subagent's turn in them through the session service. `run_subtask` executes a `subtask`
part of a user message as a `task` call on a synthetic assistant message, before the model is asked.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentforge.agents.registry import Agent, AgentRegistry, UnknownAgentError
from agentforge.llm.provider import ResolvedModel
from agentforge.model import ids
from agentforge.model.errors import unknown_error
from agentforge.model.message import (
    UserMessage,
    UserTime,
    WithParts,
)
from agentforge.model.part import (
    CompletedTime,
    ErrorTime,
    ModelRef,
    RunningTime,
    SubtaskPart,
    TextPart,
    ToolPart,
    ToolStateCompleted,
    ToolStateError,
    ToolStateRunning,
)
from agentforge.model.session import PermissionRule, Session
from agentforge.permission.gate import TurnPermissions
from agentforge.permission.rules import Ruleset, evaluate, merge
from agentforge.plugins.calls import PLUGINS_EXTRA, run_tool_with_hooks
from agentforge.runtime.runtime import Runtime
from agentforge.runtime.scope import TenantScope
from agentforge.session.channels.references import prompt_parts
from agentforge.session.events import now_ms
from agentforge.session.inputs import ModelInput, PromptInput, SessionCreateInput
from agentforge.session.skeleton import assistant_skeleton
from agentforge.tools.base import Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.builtin.task import (
    BYPASS_AGENT_CHECK,
    SUBAGENTS_EXTRA,
    TASK_TOOL,
    ChildSession,
    TaskTool,
)

if TYPE_CHECKING:
    from agentforge.session.service import SessionService

CANCELLED = "Cancelled"
SUMMARIZE_TASK = "Summarize the task tool output above and continue with your task."
# Tools a subagent never gets (unless it has its own `task` rule, for `task`): it works for its parent.
_CHILD_DENIED = ("todowrite", "todoread")


def child_rules(agent: Agent) -> list[PermissionRule]:
    """The permission rules a new child session starts with."""
    denied = list(_CHILD_DENIED)
    if not any(rule.permission == TASK_TOOL for rule in agent.permission.rules):
        denied.append(TASK_TOOL)
    return [PermissionRule(permission=name, pattern="*", action="deny") for name in denied]


def usable_subagents(agents: AgentRegistry, caller_rules: Ruleset) -> list[tuple[str, str]]:
    """(name, description) of the agents the caller may hand tasks to: not primary-only, not
    hidden, and not denied by the caller's `task` rules."""
    return [
        (agent.name, agent.description)
        for agent in agents.list()
        if agent.mode != "primary"
        and not agent.hidden
        and evaluate(TASK_TOOL, agent.name, caller_rules).action != "deny"
    ]


def describe_task_tool(tools: dict[str, Tool[Any]], agents: AgentRegistry, caller_rules: Ruleset) -> None:
    """Replace the turn's `task` tool by one whose description lists the caller's subagents."""
    task = tools.get(TASK_TOOL)
    if isinstance(task, TaskTool):
        tools[TASK_TOOL] = task.with_agents(usable_subagents(agents, caller_rules))


def _last_text(reply: WithParts) -> str:
    texts = [part.text for part in reply.parts if isinstance(part, TextPart) and not part.synthetic]
    return texts[-1] if texts else ""


class SessionSubagents:
    """Child sessions of one tenant; `caller_model` is the model of the calling assistant message."""

    def __init__(self, rt: Runtime, scope: TenantScope, caller_model: ModelRef) -> None:
        self.rt = rt
        self.scope = scope
        self.tenant_id = scope.tenant_id
        self.caller_model = caller_model

    def _service(self) -> SessionService:
        # Imported here: the service imports the loop, which imports this module.
        from agentforge.session.service import SessionService

        return SessionService(self.rt, self.tenant_id)

    def exists(self, agent: str) -> bool:
        try:
            self.scope.agents.get(agent)
        except UnknownAgentError:
            return False
        return True

    def _model_for(self, agent: Agent) -> tuple[str, str]:
        if agent.model:
            return self.scope.catalog.parse(agent.model)
        return self.caller_model.provider_id, self.caller_model.model_id

    async def open_child(
        self, *, parent_id: str, task_id: str | None, description: str, agent: str
    ) -> ChildSession:
        subagent = self.scope.agents.get(agent)
        provider_id, model_id = self._model_for(subagent)
        if task_id:
            existing = await self.rt.store.get_session(self.tenant_id, task_id)
            if existing is not None:
                if existing.parent_id != parent_id:
                    raise ToolError(f"task_id {task_id} is not a task of this session")
                return ChildSession(existing.id, provider_id, model_id)
        service = self._service()
        parent = await service.get(parent_id)
        child = await service.create(
            SessionCreateInput(
                parent_id=parent_id,
                title=f"{description} (@{agent} subagent)",
                permission=child_rules(subagent),
                directory=parent.directory,  # the subagent works where its parent does
            )
        )
        return ChildSession(child.id, provider_id, model_id)

    async def run(self, child: ChildSession, *, agent: str, prompt: str) -> str:
        service = self._service()
        session = await service.get(child.id)
        agent_names = [a.name for a in self.scope.agents.list()]
        parts = await prompt_parts(prompt, directory=Path(session.directory), agents=agent_names)
        body = PromptInput(
            model=ModelInput(provider_id=child.provider_id, model_id=child.model_id),
            agent=agent,
            parts=parts,
        )
        reply = await service.prompt(child.id, body)
        return _last_text(reply)

    async def cancel(self, child_id: str) -> None:
        await self._service().abort(child_id)


# -- subtask parts ------------------------------------------------------------------------------


class _SubtaskRun:
    """One subtask part executed as a `task` call on a synthetic assistant message."""

    def __init__(
        self, rt: Runtime, scope: TenantScope, session: Session, user: UserMessage, task: SubtaskPart
    ) -> None:
        self.rt = rt
        self.scope = scope
        self.tenant_id = scope.tenant_id
        self.session = session
        self.user = user
        self.task = task
        self.events = rt.events(scope.tenant_id)
        self.model = task.model or user.model
        self.message = assistant_skeleton(
            session_id=session.id,
            directory=session.directory,
            parent_id=user.id,
            model=self.model,
            agent=task.agent,
        )
        tool_input: dict[str, Any] = {
            "prompt": task.prompt,
            "description": task.description,
            "subagent_type": task.agent,
        }
        if task.command:
            tool_input["command"] = task.command
        self.part = ToolPart(
            id=ids.ascending("prt"),
            session_id=session.id,
            message_id=self.message.id,
            call_id=f"call_{secrets.token_hex(12)}",
            tool=TASK_TOOL,
            state=ToolStateRunning(input=tool_input, time=RunningTime(start=now_ms())),
        )

    async def run(self) -> None:
        self.events.submit_message(self.message)
        self.events.submit_part(self.part)
        try:
            result = await self._execute()
        except asyncio.CancelledError:
            await self._finish(error=CANCELLED)
            raise
        except ToolError as exc:
            await self._finish(error=f"Tool execution failed: {exc}")
        else:
            await self._finish(result=result)
        if self.task.command:
            await self._continue_after_command()

    async def _execute(self) -> ToolResult:
        try:
            agent = self.scope.agents.get(self.task.agent)
        except UnknownAgentError as exc:
            self.events.session_error(self.session.id, unknown_error(str(exc)).wire())
            raise ToolError(str(exc)) from None
        tool = self.scope.tools.get(TASK_TOOL) or TaskTool()
        return await run_tool_with_hooks(
            self.rt.plugins, tool, dict(self.part.state.input), self._context(agent), limits=self.scope.limits
        )

    def _context(self, agent: Agent) -> ToolContext:
        rules = merge(agent.permission, self.session.permission or [])
        permissions = TurnPermissions(
            self.rt.permissions, self.tenant_id, self.session.id, rules, fence=self.scope.fence
        )
        return ToolContext(
            session_id=self.session.id,
            message_id=self.message.id,
            call_id=self.part.call_id,
            agent=agent.name,
            directory=Path(self.session.directory),
            data_dir=self.scope.settings.data_dir,
            extra={
                SUBAGENTS_EXTRA: SessionSubagents(self.rt, self.scope, self.model),
                BYPASS_AGENT_CHECK: True,
                PLUGINS_EXTRA: self.rt.plugins,
            },
            ask=permissions.for_call(self.message.id, self.part.call_id),
            metadata=self._publish_metadata,
        )

    async def _publish_metadata(self, title: str | None, metadata: dict[str, Any]) -> None:
        state = self.part.state
        if isinstance(state, ToolStateRunning):
            self.part.state = state.model_copy(
                update={"title": title if title is not None else state.title, "metadata": metadata}
            )
            self.events.submit_part(self.part)

    async def _finish(self, *, result: ToolResult | None = None, error: str | None = None) -> None:
        state = self.part.state
        assert isinstance(state, ToolStateRunning)
        end = now_ms()
        if result is not None:
            self.part.state = ToolStateCompleted(
                input=state.input,
                output=result.output,
                title=result.title,
                metadata=result.metadata,
                time=CompletedTime(start=state.time.start, end=end),
            )
        else:
            self.part.state = ToolStateError(
                input=state.input,
                error=error or CANCELLED,
                metadata=state.metadata,
                time=ErrorTime(start=state.time.start, end=end),
            )
        self.message.finish = "tool-calls"
        self.message.time.completed = end
        self.events.submit_part(self.part)
        await self.events.update_message(self.message)

    async def _continue_after_command(self) -> None:
        """A command's subtask: ask the model to carry on from the task's output."""
        message = UserMessage(
            id=ids.ascending("msg"),
            session_id=self.session.id,
            time=UserTime(created=now_ms()),
            agent=self.user.agent,
            model=self.user.model,
        )
        self.events.submit_message(message)
        text = TextPart(
            id=ids.ascending("prt"),
            session_id=self.session.id,
            message_id=message.id,
            text=SUMMARIZE_TASK,
            synthetic=True,
        )
        await self.events.update_part(text)


async def run_subtask(
    rt: Runtime, scope: TenantScope, session: Session, user: UserMessage, task: SubtaskPart
) -> None:
    """KERNEL 4.7: run the subtask part `task` of the user message `user`."""
    await _SubtaskRun(rt, scope, session, user, task).run()


def caller_model(model: ResolvedModel) -> ModelRef:
    return ModelRef(provider_id=model.provider_id, model_id=model.model_id)
