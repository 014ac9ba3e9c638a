"""A shell command the user runs in a session (KERNEL 4.9), recorded as a `bash` tool call.

It runs in the runner's Shell state: refused while the session is busy, and a prompt sent meanwhile
waits for it. Before anything is written, the command goes through the bash tool's path check with
the caller's confinement and the agent's rules (session/access.py): a 400 when it names a path the
caller may not reach, a 403 when the tenant may not run commands at all. The output streams into the
running part's `metadata.output`; abort kills the command's process group and still completes the
part with what it printed. It runs in the tenant's OS sandbox; the network only where the tenant has
it (`sandbox.network`) and the agent's and session's `network` rules do not deny this command
(nobody is asked: the user typed it).
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

from pydantic import Field

from agentforge.agents.registry import Agent, UnknownAgentError
from agentforge.llm.provider import UnknownModelError
from agentforge.model import ids
from agentforge.model.base import Wire
from agentforge.model.message import (
    AssistantMessage,
    UserMessage,
    UserTime,
    WithParts,
)
from agentforge.model.part import ModelRef, TextPart
from agentforge.model.session import Session, StatusBusy, StatusIdle
from agentforge.permission.rules import evaluate
from agentforge.plugins.calls import shell_env
from agentforge.session.access import RequestAccess
from agentforge.session.errors import InvalidInputError
from agentforge.session.events import SessionEvents, now_ms
from agentforge.session.inputs import ModelInput
from agentforge.session.reverted import discard_reverted
from agentforge.session.scope import TenantScope
from agentforge.session.services import SessionServices
from agentforge.session.skeleton import assistant_skeleton
from agentforge.session.tool_part import ToolPartLifecycle
from agentforge.tools.builtin.bash import default_shell
from agentforge.tools.execute import describe_exception
from agentforge.tools.process import run_process_group
from agentforge.tools.shell_output import ShellOutput

USER_RAN_TOOL = "The following tool was executed by the user"
ABORTED_NOTE = "\n\n<metadata>\nUser aborted the command\n</metadata>"
PREVIEW_INTERVAL_SECONDS = 0.1
MAX_PREVIEW_CHARS = 30_000


class ShellInput(Wire):
    agent: str = Field(min_length=1)
    command: str = Field(min_length=1)
    message_id: str | None = Field(default=None, alias="messageID")
    model: ModelInput | None = None


class _ShellRun:
    def __init__(
        self, services: SessionServices, scope: TenantScope, session: Session, agent: Agent, model: ModelRef
    ) -> None:
        self.services = services
        self.scope = scope
        self.tenant_id = scope.tenant_id
        self.session = session
        self.agent = agent
        self.model = model
        self.events: SessionEvents = services.events(scope.tenant_id)

    async def __call__(self, body: ShellInput, abort: asyncio.Event) -> WithParts:
        user_id = body.message_id or ids.ascending("msg")
        if body.message_id is None:
            self.events.submit_message(self._user_message(user_id))
        else:
            # A client-chosen id must be new, checked before anything runs (as for prompts).
            await self.events.write_new_message(self._user_message(user_id))
        self.services.status.set(self.tenant_id, self.session.id, StatusBusy())
        self._note_user_ran_tool(user_id)
        message = self._assistant(user_id)
        self.events.submit_message(message)
        call = ToolPartLifecycle.new(
            self.events,
            session_id=self.session.id,
            message_id=message.id,
            call_id=f"call_{secrets.token_hex(12)}",
            tool="bash",
        )
        call.start({"command": body.command})
        try:
            output = await self._execute(body.command, call, abort)
        except Exception as exc:  # the shell could not start, or a shell_env plugin failed
            output = f"Failed to run the command: {describe_exception(exc)}"
        end = now_ms()
        # Completed whatever happened: the user's command ran (or failed to start); its output says so.
        call.complete(output, title="", metadata={"output": output, "description": ""}, now=end)
        message.time.completed = end
        await self.events.update_message(message)
        return WithParts(info=message, parts=[call.part])

    def _user_message(self, user_id: str) -> UserMessage:
        return UserMessage(
            id=user_id,
            session_id=self.session.id,
            time=UserTime(created=now_ms()),
            agent=self.agent.name,
            model=self.model,
        )

    def _note_user_ran_tool(self, user_id: str) -> None:
        self.events.submit_part(
            TextPart(
                id=ids.ascending("prt"),
                session_id=self.session.id,
                message_id=user_id,
                text=USER_RAN_TOOL,
                synthetic=True,
            )
        )

    def _assistant(self, user_id: str) -> AssistantMessage:
        directory = self.session.directory
        return assistant_skeleton(
            session_id=self.session.id,
            directory=directory,
            parent_id=user_id,
            model=self.model,
            agent=self.agent.name,
        )

    async def _execute(self, command: str, call: ToolPartLifecycle, abort: asyncio.Event) -> str:
        cwd = Path(self.session.directory)
        extra_env = await shell_env(
            self.services.plugins, cwd=cwd, session_id=self.session.id, call_id=call.part.call_id
        )
        sandbox = self.scope.confinement.sandbox
        output = ShellOutput(
            self.scope.settings.data_dir, self.scope.limits, max_total_bytes=sandbox.output_bytes
        )
        preview = asyncio.create_task(self._preview(call, output))
        try:
            outcome = await run_process_group(
                [default_shell(), "-c", command],
                cwd=cwd,
                env=self.scope.confinement.env.build(extra_env),
                time_limit=None,
                abort=abort,
                on_output=output.add,
                sandbox=sandbox.command(network=self._network_allowed(command)),
            )
            final = await output.finish()
        finally:
            preview.cancel()
            output.close()
        text = final.text
        if outcome.ending == "aborted":
            text += ABORTED_NOTE
        return text

    def _network_allowed(self, command: str) -> bool:
        rule = evaluate("network", command, self.agent.permission, self.session.permission or [])
        return rule.action != "deny"

    async def _preview(self, call: ToolPartLifecycle, output: ShellOutput) -> None:
        """Publish the output so far on the running part, at most every PREVIEW_INTERVAL_SECONDS."""
        published = ""
        while True:
            await asyncio.sleep(PREVIEW_INTERVAL_SECONDS)
            text = output.tail(MAX_PREVIEW_CHARS)
            if text == published:
                continue
            published = text
            call.progress(None, {"output": text, "description": ""})


def _pick_agent(scope: TenantScope, name: str) -> Agent:
    try:
        return scope.agents.get(name)
    except UnknownAgentError as exc:
        raise InvalidInputError(str(exc)) from None


def _pick_model(scope: TenantScope, session: Session, body: ShellInput, agent: Agent) -> ModelRef:
    """The request's model, else the agent's, else the session's last one, else the default."""
    catalog = scope.catalog
    try:
        if body.model is not None:
            provider_id, model_id = body.model.provider_id, body.model.model_id
        elif agent.model:
            provider_id, model_id = catalog.parse(agent.model)
        elif session.model is not None:
            provider_id, model_id = session.model.provider_id, session.model.id
        else:
            provider_id, model_id = catalog.default_model()
        catalog.resolve(provider_id, model_id)
    except UnknownModelError as exc:
        raise InvalidInputError(str(exc)) from None
    return ModelRef(provider_id=provider_id, model_id=model_id)


async def run_shell(
    services: SessionServices, scope: TenantScope, session: Session, body: ShellInput
) -> WithParts:
    """Run the command to its end (or abort); the assistant message and its `bash` part. Raises
    ShellNotAllowedError for a confined tenant without the server's `tenancy.shell` grant."""
    services.runners.admit()  # before anything is stored
    scope.confinement.check_shell()
    if body.message_id is not None and not ids.has_prefix(body.message_id, "msg"):
        raise InvalidInputError(f"messageID must be a msg_ id, got {body.message_id!r}")
    agent = _pick_agent(scope, body.agent)
    model = _pick_model(scope, session, body, agent)
    access = RequestAccess.of(
        permissions=services.permissions,
        tenant_id=scope.tenant_id,
        confinement=scope.confinement,
        data_dir=scope.settings.data_dir,
        session=session,
        message_id=body.message_id or ids.ascending("msg"),
        agent=agent,
    )
    await access.command(body.command)  # its directory and literal paths: the bash tool's check
    await discard_reverted(services, scope.tenant_id, session)  # a new message makes a revert final
    run = _ShellRun(services, scope, session, agent, model)
    tenant_id = scope.tenant_id
    return await services.runners.run_shell(
        session.id,
        lambda abort: run(body, abort),
        on_idle=lambda: services.status.set(tenant_id, session.id, StatusIdle()),
        tenant_id=tenant_id,
    )
