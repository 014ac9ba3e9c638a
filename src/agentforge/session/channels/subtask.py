"""Subagents: the session side of the `task` tool (KERNEL 8.3), and subtask parts (KERNEL 4.7).

`SessionSubagents` implements the task tool's `Subagents` protocol: it opens child sessions and
runs a subagent's turn in them through the prompter it is given (session/prompt.py `SessionPrompt`:
handed down, not imported, since the prompt drives the loop that runs this tool). `run_subtask`
executes a `subtask` part of a user message as a `task` call on a synthetic assistant message, before
the model is asked.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from agentforge.agents.registry import Agent, AgentRegistry, UnknownAgentError
from agentforge.llm.provider import ResolvedModel
from agentforge.model import ids
from agentforge.model.errors import unknown_error
from agentforge.model.message import (
    UserMessage,
    UserTime,
    WithParts,
)
from agentforge.model.part import ModelRef, SubtaskPart, TextPart
from agentforge.model.session import PermissionRule, Session
from agentforge.permission.gate import TurnPermissions
from agentforge.permission.rules import FrozenRules, Ruleset, evaluate, frozen, merge, thawed
from agentforge.plugins.calls import run_tool_with_hooks
from agentforge.session.access import RequestAccess
from agentforge.session.channels.references import prompt_parts
from agentforge.session.events import now_ms
from agentforge.session.inputs import ModelInput, PromptInput, SessionCreateInput
from agentforge.session.scope import TenantScope
from agentforge.session.service import SessionService
from agentforge.session.services import SessionServices
from agentforge.session.skeleton import assistant_skeleton
from agentforge.session.tool_part import ToolPartLifecycle
from agentforge.tools.base import Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.builtin.task import TASK_TOOL, TaskTool
from agentforge.tools.services import ChildSession, ToolServices

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
        candidates = tuple(
            (agent.name, agent.description)
            for agent in agents.list()
            if agent.mode != "primary" and not agent.hidden
        )
        tools[TASK_TOOL] = _task_tool(task, candidates, frozen(caller_rules))


@functools.lru_cache(maxsize=256)
def _task_tool(
    task: TaskTool, candidates: tuple[tuple[str, str], ...], caller_rules: FrozenRules
) -> TaskTool:
    """The same every model call of a session: built once per registry tool, subagents and rules."""
    rules = thawed(caller_rules)
    usable = [(name, text) for name, text in candidates if evaluate(TASK_TOOL, name, rules).action != "deny"]
    return task.with_agents(usable)


def _last_text(reply: WithParts) -> str:
    texts = [part.text for part in reply.parts if isinstance(part, TextPart) and not part.synthetic]
    return texts[-1] if texts else ""


class Prompter(Protocol):
    """How a subagent's turn is run in its child session (session/prompt.py `SessionPrompt`)."""

    async def prompt(self, session_id: str, body: PromptInput) -> WithParts: ...


class SessionSubagents:
    """Child sessions of one tenant; `caller_model` is the model of the calling assistant message."""

    def __init__(
        self, services: SessionServices, prompter: Prompter, scope: TenantScope, caller_model: ModelRef
    ) -> None:
        self.services = services
        self.prompter = prompter
        self.scope = scope
        self.tenant_id = scope.tenant_id
        self.caller_model = caller_model
        self.sessions = SessionService(services, scope.tenant_id)

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
            existing = await self.services.store.get_session(self.tenant_id, task_id)
            if existing is not None:
                if existing.parent_id != parent_id:
                    raise ToolError(f"task_id {task_id} is not a task of this session")
                return ChildSession(existing.id, provider_id, model_id)
        parent = await self.sessions.get(parent_id)
        child = await self.sessions.create(
            SessionCreateInput(
                parent_id=parent_id,
                title=f"{description} (@{agent} subagent)",
                permission=child_rules(subagent),
                directory=parent.directory,  # the subagent works where its parent does
            )
        )
        return ChildSession(child.id, provider_id, model_id)

    async def run(self, child: ChildSession, *, agent: str, prompt: str) -> str:
        session = await self.sessions.get(child.id)
        agent_names = [a.name for a in self.scope.agents.list()]
        access = RequestAccess.of(
            permissions=self.services.permissions,
            tenant_id=self.tenant_id,
            confinement=self.scope.confinement,
            data_dir=self.scope.settings.data_dir,
            session=session,
            message_id=ids.ascending("msg"),
            agent=self.scope.agents.get(agent),
        )
        parts = await prompt_parts(prompt, access=access, agents=agent_names)
        body = PromptInput(
            model=ModelInput(provider_id=child.provider_id, model_id=child.model_id),
            agent=agent,
            parts=parts,
        )
        reply = await self.prompter.prompt(child.id, body)
        return _last_text(reply)

    async def cancel(self, child_id: str) -> None:
        await self.sessions.abort(child_id)


# -- subtask parts ------------------------------------------------------------------------------


SubagentsFor = Callable[[ModelRef], SessionSubagents]


class _SubtaskRun:
    """One subtask part executed as a `task` call on a synthetic assistant message."""

    def __init__(
        self,
        services: SessionServices,
        subagents: SubagentsFor,
        scope: TenantScope,
        session: Session,
        user: UserMessage,
        task: SubtaskPart,
    ) -> None:
        self.services = services
        self.subagents = subagents
        self.scope = scope
        self.tenant_id = scope.tenant_id
        self.session = session
        self.user = user
        self.task = task
        self.events = services.events(scope.tenant_id)
        self.model = task.model or user.model
        self.message = assistant_skeleton(
            session_id=session.id,
            directory=session.directory,
            parent_id=user.id,
            model=self.model,
            agent=task.agent,
        )
        self.input: dict[str, Any] = {
            "prompt": task.prompt,
            "description": task.description,
            "subagent_type": task.agent,
        }
        if task.command:
            self.input["command"] = task.command
        self.call = ToolPartLifecycle.new(
            self.events,
            session_id=session.id,
            message_id=self.message.id,
            call_id=f"call_{secrets.token_hex(12)}",
            tool=TASK_TOOL,
        )

    async def run(self) -> None:
        self.events.submit_message(self.message)
        self.call.start(self.input)
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
            self.services.plugins, tool, dict(self.input), self._context(agent), limits=self.scope.limits
        )

    def _context(self, agent: Agent) -> ToolContext:
        rules = merge(agent.permission, self.session.permission or [])
        permissions = TurnPermissions(self.services.permissions, self.tenant_id, self.session.id, rules)
        return ToolContext(
            session_id=self.session.id,
            message_id=self.message.id,
            call_id=self.call.part.call_id,
            agent=agent.name,
            directory=Path(self.session.directory),
            data_dir=self.scope.settings.data_dir,
            confinement=self.scope.confinement,
            ask=permissions.for_call(self.message.id, self.call.part.call_id),
            # A person chose this subagent (a subtask part): no `task` ask.
            services=ToolServices(subagents=self.subagents(self.model), subagent_chosen=True),
            metadata=self._publish_metadata,
        )

    async def _publish_metadata(self, title: str | None, metadata: dict[str, Any]) -> None:
        self.call.progress(title, metadata)

    async def _finish(self, *, result: ToolResult | None = None, error: str | None = None) -> None:
        end = now_ms()
        if result is not None:
            self.call.complete(result.output, title=result.title, metadata=result.metadata, now=end)
        else:
            self.call.fail(error or CANCELLED, now=end)
        self.message.finish = "tool-calls"
        self.message.time.completed = end
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
    services: SessionServices,
    scope: TenantScope,
    session: Session,
    user: UserMessage,
    task: SubtaskPart,
    *,
    subagents: SubagentsFor,
) -> None:
    """KERNEL 4.7: run the subtask part `task` of the user message `user`; `subagents` gives the
    task tool its child sessions for a caller model."""
    await _SubtaskRun(services, subagents, scope, session, user, task).run()


def caller_model(model: ResolvedModel) -> ModelRef:
    return ModelRef(provider_id=model.provider_id, model_id=model.model_id)
