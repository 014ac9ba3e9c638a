"""`run_loop`: the outer ReAct loop of one session (KERNEL 4.4).

Each iteration re-reads the effective history, decides whether the turn is over, and otherwise writes
an assistant skeleton and hands one model call to the processor. It never touches SQL: history comes
from the store's read API and every write goes through the session's write intents.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agentforge.agents.registry import Agent, UnknownAgentError
from agentforge.config import deep_merge
from agentforge.llm.messages import AssistantModelMessage, ModelRequest, TextContent
from agentforge.llm.provider import ResolvedModel, UnknownModelError
from agentforge.model.errors import unknown_error
from agentforge.model.message import (
    AssistantMessage,
    UserMessage,
    WithParts,
)
from agentforge.model.part import CompactionPart, ModelRef, SubtaskPart
from agentforge.model.session import Session, StatusBusy
from agentforge.permission.gate import TurnPermissions
from agentforge.plugins import calls as hooks
from agentforge.session import structured
from agentforge.session.access import turn_rules
from agentforge.session.channels import title
from agentforge.session.channels.subtask import (
    Prompter,
    SessionSubagents,
    caller_model,
    describe_task_tool,
    run_subtask,
)
from agentforge.session.channels.todos import StoreTodos
from agentforge.session.context import surroundings, system
from agentforge.session.context.compaction import Compactor
from agentforge.session.context.history import (
    Bindings,
    bind,
    filter_compacted,
    has_pending_tool_calls,
    to_model_messages,
    unanswered_last,
    with_queued_reminders,
)
from agentforge.session.context.reminders import with_reminders
from agentforge.session.context.surroundings import Surroundings, SystemContext
from agentforge.session.events import SessionEvents
from agentforge.session.processor import Processor, ProcessorDeps
from agentforge.session.runner import RunHandle
from agentforge.session.scope import TenantScope
from agentforge.session.services import SessionServices
from agentforge.session.skeleton import assistant_skeleton
from agentforge.session.snapshots import StepSnapshot, snapshot_repo
from agentforge.session.turn_tools import INVALID_TOOL, TurnTools, calls_since
from agentforge.store import StoreWriteError
from agentforge.tools.builtin.bash import BashTool
from agentforge.tools.services import ToolServices

log = logging.getLogger(__name__)

OUTPUT_TOKEN_MAX = 32_000


# A step's new assistant message waits this long at most for the step's first part (or any other
# write) to commit with it, where the writer lingers (Postgres): a model that answers within it
# costs the step one transaction less (bench/README.md, eleventh round); one that takes longer
# finds the message written meanwhile, this much later. A process killed within it leaves no open
# message, as one killed before the message's commit always did (recovery has nothing to close;
# the prompt was not answered).
STEP_LINGER: Final = 0.005


class LoopError(Exception):
    pass


@dataclass(slots=True)
class StepAhead:
    """What a prompt starts for the first step of the run it starts, while its user message is
    written: the system prompt's file system look-up, and the history as that write leaves it
    (`Store.history_after_writes`). Each is taken once; `drop` ends what nobody took."""

    look_around: surroundings.LookAhead | None = None
    history: asyncio.Future[list[WithParts]] | None = None
    noted: int = 0  # messages noted for the run when the history was asked for (`RunHandle.noted`)

    def take_look_around(self) -> asyncio.Future[Surroundings] | None:
        ahead, self.look_around = self.look_around, None
        return None if ahead is None else ahead.take()

    def take_history(self) -> asyncio.Future[list[WithParts]] | None:
        history, self.history = self.history, None
        return history

    def drop(self) -> None:
        if self.look_around is not None:
            self.look_around.drop()
        history, self.history = self.history, None
        if history is not None:
            _drop_read(history)


def _drop_read(history: asyncio.Future[list[WithParts]]) -> None:
    """A history read ahead that nobody will take: a task (Postgres's) is cancelled; the writer's
    future (SQLite's) it resolves itself. A failure is retrieved: a read nobody needed is no error."""
    if not history.done():
        if isinstance(history, asyncio.Task):
            history.cancel()
    elif not history.cancelled():
        history.exception()


def turn_is_over(found: Bindings) -> bool:
    """The one exit condition: the newest reply written for the newest user message finished and
    asked for no tools. By its parent, where KERNEL 4.4 compares ids (`lastUser.id <
    lastAssistant.id`): ids order messages by when their id was taken, not by when they were
    written or seen (`Bindings.answer`)."""
    answer = found.answer
    if found.last_user is None or answer is None or not answer.finish:
        return False
    if answer.finish == "tool-calls":
        return False
    # Some providers report "stop" although they made tool calls: their results must go back.
    return not has_pending_tool_calls(found.answer_parts)


class TurnLoop:
    """One run of a session's loop. `run` is its handle in the runner registry (user messages that
    arrive meanwhile); `prompter` runs subagents' turns in child sessions."""

    def __init__(
        self,
        services: SessionServices,
        scope: TenantScope,
        session: Session,
        run: RunHandle,
        *,
        prompter: Prompter,
        ahead: StepAhead | None = None,
    ) -> None:
        """`ahead`: what the prompt started for the first step (StepAhead)."""
        self.services = services
        self.scope = scope
        self.tenant_id = scope.tenant_id
        self.session = session
        self.handle = run
        self.prompter = prompter
        self.events: SessionEvents = services.events(self.tenant_id)
        self.step = 0
        self.final: WithParts | None = None
        self.compactor = Compactor.for_session(services, scope, session)
        self._surroundings: asyncio.Future[Surroundings] | None = None
        self._ahead = ahead
        # The next step's history read ahead by the writer (right behind the prompt's user message,
        # or behind the last step's last write), with the handle's count of noted inputs then.
        self._read_ahead: tuple[asyncio.Future[list[WithParts]], int] | None = None
        history = None if ahead is None else ahead.take_history()
        if history is not None and ahead is not None:
            self._read_ahead = (history, ahead.noted)
        self._stored: list[WithParts] = []  # the last history read
        # The next step's file system look-up, started behind a tool step's last write, with the
        # handle's count of noted inputs then (a message noted since may follow a change it missed).
        self._look_ahead: tuple[surroundings.LookAhead, int] | None = None

    async def run(self) -> WithParts | None:
        """Run until the turn is over; returns the last assistant message as written (None when the
        turn was already over, and the caller reads the newest reply from the store)."""
        with self.services.observer.turn(self.tenant_id, self.session.id) as observed:
            outcome = "failed"
            try:
                final = await self._run()
                failed = final is not None and getattr(final.info, "error", None) is not None
                outcome = "error" if failed else "completed"
                return final
            except asyncio.CancelledError:
                outcome = "aborted"
                raise
            finally:
                observed.finish(outcome)

    async def _run(self) -> WithParts | None:
        try:
            return await self._iterate()
        finally:
            self._drop_surroundings()
            if self._ahead is not None:
                self._ahead.drop()
            surroundings.unused(self._take_look_ahead())
            pending, self._read_ahead = self._read_ahead, None
            if pending is not None:
                _drop_read(pending[0])

    async def _iterate(self) -> WithParts | None:
        self.handle.take_new_input()  # this first read sees everything so far
        while True:
            self.services.status.set(self.tenant_id, self.session.id, StatusBusy())
            await self.handle.inputs_written()
            # The system prompt's file system look-up (kept unless something changed: a few stats
            # tell) runs in a thread while history is read (a model call awaits both); an iteration
            # that makes no model call drops it. The first may have been started by the prompt.
            self._drop_surroundings()
            ahead, self._ahead = self._ahead, None
            self._surroundings = (
                (None if ahead is None else ahead.take_look_around())
                or self._take_look_ahead()
                or self._look_around()
            )
            # Read from the last compaction boundary on: turn cost does not grow with session length.
            stored = await self._history()
            self._stored = stored
            history = filter_compacted(stored)
            found = bind(history)
            if found.last_user is None:
                raise LoopError(f"Session {self.session.id} has no user message")
            if turn_is_over(found):
                return self.final
            self.step += 1
            if self.step == 1:
                title.maybe_generate(self.services, self.scope, self.session, history)
            resolved = self._resolve(found.last_user)
            if resolved is None:
                return self.final
            agent, model = resolved
            task = found.tasks.pop() if found.tasks else None
            if isinstance(task, SubtaskPart):
                await run_subtask(
                    self.services, self.scope, self.session, found.last_user, task, subagents=self._subagents
                )
                continue
            if isinstance(task, CompactionPart):
                if not await self._compact(task, history):
                    return self.final
                continue
            if await self._compact_if_overflowed(found, model):
                continue
            if not await self._step(agent, model, found, history):
                return self.final

    def _read_after(self, processor: Processor) -> None:
        """A step whose tool calls all ran is followed by another (their results go back to the
        model): its history is read right behind the step's last write, and the system prompt's
        file system look-up starts while that write commits (the step's tools are done)."""
        if not processor.made_tool_calls or processor.aborted or processor.blocked:
            return
        if processor.message.error is not None or processor.needs_compaction:
            return
        with contextlib.suppress(StoreWriteError):  # closing: the next read fails as it would have
            history = self.services.store.history_after_writes(self.tenant_id, self.session.id)
            self._read_ahead = (history, self.handle.noted)
        surroundings.unused(self._take_look_ahead())  # none is left: each step takes its own
        self._look_ahead = (surroundings.LookAhead(self._system_context()), self.handle.noted)

    def _take_look_ahead(self) -> asyncio.Future[Surroundings] | None:
        """The look-up started behind the last step's write, unless a message was noted since (its
        sender may have changed an instruction file first: looked at again); dropped otherwise."""
        pending, self._look_ahead = self._look_ahead, None
        if pending is None:
            return None
        look, noted = pending
        if noted != self.handle.noted:
            look.drop()
            return None
        return look.take()

    async def _history(self) -> list[WithParts]:
        """The step's history: the one read ahead for it, unless a message was noted on the run's
        handle since it was asked for (that message may have been queued behind the read, and its
        id, older than this step's reply, would count as answered), else read now."""
        pending, self._read_ahead = self._read_ahead, None
        if pending is not None:
            history, noted = pending
            try:
                read = await history
            except Exception as exc:  # a failed read ahead: read as usual
                log.warning("history read ahead for %s failed (%s); reading it again", self.session.id, exc)
            else:
                if noted == self.handle.noted:
                    return read
            await self.handle.inputs_written()
        return await self.services.store.history_since_compaction(self.tenant_id, self.session.id)

    def seen(self) -> list[WithParts]:
        """The history this run last read and the reply it wrote after (what pruning looks at)."""
        return [*self._stored, *([self.final] if self.final is not None else [])]

    def _look_around(self) -> asyncio.Future[Surroundings]:
        return asyncio.ensure_future(surroundings.look_around(self._system_context()))

    async def _looked_around(self) -> Surroundings | None:
        pending, self._surroundings = self._surroundings, None
        return None if pending is None else await pending

    def _drop_surroundings(self) -> None:
        pending, self._surroundings = self._surroundings, None
        surroundings.unused(pending)

    def _resolve(self, user: UserMessage) -> tuple[Agent, ResolvedModel] | None:
        try:
            agent = self.scope.agents.get(user.agent)
            model = self.scope.catalog.resolve(user.model.provider_id, user.model.model_id)
        except (UnknownAgentError, UnknownModelError) as exc:
            self.events.session_error(self.session.id, unknown_error(str(exc)).wire())
            return None
        return agent, model

    async def _step(
        self, agent: Agent, model: ResolvedModel, found: Bindings, history: list[WithParts]
    ) -> bool:
        """One model call. Returns whether the loop should go on."""
        assert found.last_user is not None
        is_last_step = agent.steps is not None and self.step >= agent.steps
        message = self._skeleton(agent, model, found.last_user)
        # Not awaited: the writer keeps order, and the processor awaits its final message write
        # before the loop reads history again. It lingers for the step's first part (STEP_LINGER).
        self.events.submit_message(message, linger=STEP_LINGER)
        history = unanswered_last(history, found)
        tools = self._tools(agent, model, found.last_user, history, is_last_step)
        structured_turn = structured.attach(tools, found.last_user, history)
        if self.step > 1 and found.last_finished is not None:
            history = with_queued_reminders(history, found.last_finished.id)
        history = with_reminders(history, agent.name)
        plugins, sid = self.services.plugins, self.session.id
        history = await hooks.history(plugins, session_id=sid, messages=history)
        prompt = await system.system_prompt(
            agent,
            model,
            self._system_context(),
            found.last_user.system,
            surroundings=await self._looked_around(),
        )
        variant = found.last_user.model.variant if found.last_user else None
        request = self._request(agent, model, prompt, history, is_last_step, variant)
        if structured_turn is not None:
            structured_turn.prepare(request)
        await hooks.model_request(plugins, request, session_id=sid, agent=agent.name, model=model)
        request.tools = await hooks.tool_specs(plugins, tools.visible())
        processor = Processor(self._deps(), message, model, tools)
        processor.after_last_write = lambda: self._read_after(processor)
        directory = Path(self.session.directory)
        snapshot = StepSnapshot(lambda: snapshot_repo(self.scope, directory), self.events, message)
        tools.before_run = snapshot.before_tool
        try:
            outcome = await processor.process(request)
        finally:
            await snapshot.finish()  # what the step's tools changed, for revert
        self.final = processor.result()
        if structured_turn is not None and await structured_turn.settle(processor, self.events):
            return False
        if outcome == "compact":
            user = found.last_user
            finished = processor.message.finish is not None
            await self.compactor.create(agent=user.agent, model=user.model, auto=True, overflow=not finished)
            return True
        if outcome == "stop" or is_last_step:
            return False
        return not self._answered(processor)

    async def _compact(self, task: CompactionPart, history: list[WithParts]) -> bool:
        """Run a pending compaction (KERNEL 4.4 step 7); False when the loop must stop."""
        outcome, summary = await self.compactor.process(task, history)
        if summary is not None:
            self.final = summary
        return outcome != "stop"

    async def _compact_if_overflowed(self, found: Bindings, model: ResolvedModel) -> bool:
        """KERNEL 4.4 step 8: the last finished reply already filled the context, so compact first."""
        last, user = found.last_finished, found.last_user
        if last is None or user is None or last.summary or not self.compactor.overflows(last.tokens, model):
            return False
        await self.compactor.create(agent=user.agent, model=user.model, auto=True)
        return True

    def _answered(self, processor: Processor) -> bool:
        """The exit test on what this step just wrote, sparing a history read when it already holds:
        the reply finished without tool calls and no user message arrived meanwhile."""
        finish = processor.message.finish
        if finish is None or finish in ("tool-calls", "unknown") or processor.made_tool_calls:
            return False
        return not self.handle.take_new_input()

    def _skeleton(self, agent: Agent, model: ResolvedModel, user: UserMessage) -> AssistantMessage:
        return assistant_skeleton(
            session_id=self.session.id,
            directory=self.session.directory,
            parent_id=user.id,
            model=model,
            agent=agent.name,
            variant=user.model.variant,
        )

    def _tools(
        self,
        agent: Agent,
        model: ResolvedModel,
        user: UserMessage,
        history: list[WithParts],
        is_last_step: bool,
    ) -> TurnTools:
        permissions = self._permissions(agent, user)
        available = (
            {}
            if is_last_step
            else {tool.id: tool for tool in self.scope.tools.for_model(model.provider_id, model.model_id)}
        )
        # KERNEL 5.6: tools the user switched off for this turn, and tools the rules deny outright.
        switched_off = {name for name, enabled in (user.tools or {}).items() if not enabled}
        if self.scope.confinement.shell_denied is not None:
            switched_off.add(BashTool.id)  # a confined tenant without the server's tenancy.shell grant
        for name in switched_off | permissions.disabled(available):
            available.pop(name, None)
        describe_task_tool(available, self.scope.agents, permissions.ruleset)
        invalid = self.scope.tools.get(INVALID_TOOL)
        if invalid is not None:
            available[INVALID_TOOL] = invalid
        return TurnTools(
            tools=available,
            directory=Path(self.session.directory),
            data_dir=self.scope.settings.data_dir,
            agent=agent.name,
            permissions=permissions,
            confinement=self.scope.confinement,
            services=ToolServices(
                todos=StoreTodos(self.services.store, self.tenant_id),
                questions=self.services.questions.for_tenant(self.tenant_id),
                subagents=self._subagents(caller_model(model)),
                shell_env=hooks.shell_env_hook(self.services.plugins),
            ),
            plugins=self.services.plugins,
            earlier_calls=calls_since(history, user.id),
        )

    def _permissions(self, agent: Agent, user: UserMessage) -> TurnPermissions:
        ruleset = turn_rules(agent, self.session, user.tools)
        return TurnPermissions(self.services.permissions, self.tenant_id, self.session.id, ruleset)

    def _subagents(self, caller: ModelRef) -> SessionSubagents:
        return SessionSubagents(self.services, self.prompter, self.scope, caller)

    def _request(
        self,
        agent: Agent,
        model: ResolvedModel,
        prompt: list[str],
        history: list[WithParts],
        is_last_step: bool,
        variant: str | None = None,
    ) -> ModelRequest:
        """The request but its tools (`hooks.tool_specs` gives them, after the plugins' other hooks)."""
        messages = to_model_messages(history, model=(model.provider_id, model.model_id))
        if is_last_step:
            messages.append(AssistantModelMessage(content=[TextContent(text=system.MAX_STEPS_PROMPT)]))
        return ModelRequest(
            system=prompt,
            messages=messages,
            temperature=agent.temperature,
            top_p=agent.top_p,
            max_output_tokens=min(model.limit_output, OUTPUT_TOKEN_MAX) or OUTPUT_TOKEN_MAX,
            # KERNEL 5.6: model options, then the agent's, then the selected variant's (deep, later wins).
            options=deep_merge(
                deep_merge(model.options, agent.options or {}), model.variants.get(variant or "", {})
            ),
            headers=dict(model.headers),
        )

    def _system_context(self) -> SystemContext:
        return self.scope.system_context(self.session.directory)

    def _deps(self) -> ProcessorDeps:
        return ProcessorDeps(
            events=self.events,
            status=self.services.status,
            stream=self.services.stream,
            clock=self.services.clock,
            limits=self.scope.limits,
            data_dir=self.scope.settings.data_dir,
            max_retries=self.scope.max_retries,
            observer=self.services.observer,
            compaction=self.compactor.config.auto,
            overflow=self.compactor.overflows,
        )
