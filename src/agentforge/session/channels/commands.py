"""Slash commands (KERNEL 4.8): prompt templates from the config file and from Markdown files.

A command is `command.<name>` in the config (`{template, description?, agent?, model?, subtask?}`)
or a file `<name>.md` (front matter with the same keys, the body as template) in
`<config dir>/commands/` or `<workspace>/.agentforge/commands/`; later sources override earlier ones.
Running one expands the template with the arguments, runs its !`shell` snippets in the workspace
(inside the tenant's OS sandbox), turns `@` references into parts, and prompts the session, either
directly or as a subtask. A confined tenant without the server's `tenancy.shell` grant cannot run a
command with snippets (ShellNotAllowedError, a 403); snippets and references naming paths the caller
may not reach fail the request with a 400 (session/access.py).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from agentforge.agents.markdown import read_definitions
from agentforge.agents.registry import Agent, UnknownAgentError
from agentforge.config import Config, ConfigError, user_config_file
from agentforge.llm.provider import ProviderCatalog, UnknownModelError
from agentforge.model import ids
from agentforge.model.base import Wire
from agentforge.model.errors import unknown_error
from agentforge.model.events import Event
from agentforge.model.message import WithParts
from agentforge.model.part import ModelRef
from agentforge.permission.rules import evaluate
from agentforge.plugins.calls import shell_env
from agentforge.session.access import RequestAccess
from agentforge.session.channels.references import prompt_parts
from agentforge.session.errors import InvalidInputError
from agentforge.session.inputs import FilePartInput, ModelInput, PartInput, PromptInput, SubtaskPartInput
from agentforge.session.prompt import SessionPrompt
from agentforge.session.scope import TenantScope
from agentforge.tools.builtin.bash import default_shell
from agentforge.tools.process import run_process_group
from agentforge.tools.sandbox import CommandSandbox, SandboxRefusedError

COMMAND_EXECUTED = "command.executed"
COMMANDS_DIR = "commands"
WORKSPACE_DIR = ".agentforge"
SHELL_SNIPPET_TIMEOUT_SECONDS = 30.0

# Arguments: "[Image N]" tokens, quoted strings, or runs of non-space characters.
_ARGUMENT = re.compile(r"""\[Image\s+\d+\]|"[^"]*"|'[^']*'|[^\s"']+""")
_POSITIONAL = re.compile(r"\$(\d+)")
_ALL_ARGUMENTS = "$ARGUMENTS"
_SHELL_SNIPPET = re.compile(r"!`([^`]+)`")


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    template: str
    description: str | None = None
    agent: str | None = None
    model: str | None = None  # "provider/model"
    subtask: bool | None = None

    @property
    def hints(self) -> list[str]:
        """The placeholders the template uses, as a client would prompt for them."""
        numbered = sorted({int(n) for n in _POSITIONAL.findall(self.template)})
        hints = [f"${n}" for n in numbered]
        if _ALL_ARGUMENTS in self.template:
            hints.append(_ALL_ARGUMENTS)
        return hints

    def wire(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"name": self.name, "source": "command", "template": self.template}
        for key in ("description", "agent", "model", "subtask"):
            value = getattr(self, key)
            if value is not None:
                shown[key] = value
        shown["hints"] = self.hints
        return shown


class CommandInput(Wire):
    command: str = Field(min_length=1)
    arguments: str = ""
    message_id: str | None = Field(default=None, alias="messageID")
    agent: str | None = None
    model: str | None = None  # "provider/model"
    variant: str | None = None
    parts: list[FilePartInput] = Field(default_factory=list)


# -- loading ------------------------------------------------------------------------------------


def command_directories(workspace: Path) -> list[Path]:
    return [user_config_file().parent / COMMANDS_DIR, workspace / WORKSPACE_DIR / COMMANDS_DIR]


def _command(name: str, raw: Any, where: str) -> Command:
    if not isinstance(raw, dict) or not isinstance(raw.get("template"), str):
        raise ConfigError(f"{where}: a command needs a template string")
    optional = {key: raw.get(key) for key in ("description", "agent", "model")}
    for key, value in optional.items():
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}: {key} must be a string")
    subtask = raw.get("subtask")
    if subtask is not None and not isinstance(subtask, bool):
        raise ConfigError(f"{where}: subtask must be true or false")
    return Command(name=name, template=raw["template"], subtask=subtask, **optional)


def load_commands(config: Config, workspace: Path) -> dict[str, Command]:
    """Every command by name, config file first, then the Markdown directories (blocking file IO)."""
    commands: dict[str, Command] = {}
    configured = (config.model_extra or {}).get("command") or {}
    if not isinstance(configured, dict):
        raise ConfigError("command: must map command names to definitions")
    for name, raw in configured.items():
        commands[name] = _command(name, raw, f"command.{name}")
    for directory in command_directories(workspace):
        for definition in read_definitions(directory):
            raw = {**definition.fields, "template": definition.body}
            commands[definition.name] = _command(definition.name, raw, str(definition.path))
    return commands


async def list_commands(config: Config, workspace: Path) -> list[Command]:
    try:
        found = await asyncio.to_thread(load_commands, config, workspace)
    except ConfigError as exc:
        raise InvalidInputError(str(exc)) from None
    return sorted(found.values(), key=lambda command: command.name)


# -- expansion ----------------------------------------------------------------------------------


def tokenize(arguments: str) -> list[str]:
    """Split the argument string; surrounding quotes are dropped."""
    tokens = []
    for token in _ARGUMENT.findall(arguments):
        if len(token) >= 2 and token[0] == token[-1] and token[0] in "\"'":
            token = token[1:-1]
        tokens.append(token)
    return tokens


def expand(template: str, arguments: str) -> str:
    """`$1..$n` take positional arguments (the highest one the rest as well), `$ARGUMENTS` the raw
    string; a template using neither gets the arguments appended after a blank line."""
    tokens = tokenize(arguments)
    numbers = [int(n) for n in _POSITIONAL.findall(template)]
    highest = max(numbers, default=0)

    def positional(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        if index < 0 or index >= len(tokens):
            return ""
        if index == highest - 1:
            return " ".join(tokens[index:])
        return tokens[index]

    text = _POSITIONAL.sub(positional, template)
    uses_all = _ALL_ARGUMENTS in template
    text = text.replace(_ALL_ARGUMENTS, arguments)
    if not numbers and not uses_all and arguments.strip():
        text = f"{text}\n\n{arguments}"
    return text.strip()


def shell_snippets(text: str) -> list[str]:
    """The distinct !`command` snippets of `text`, in order."""
    return list(dict.fromkeys(_SHELL_SNIPPET.findall(text)))


async def run_shell_snippets(
    text: str, *, cwd: Path, env: dict[str, str], sandbox: Callable[[str], CommandSandbox]
) -> str:
    """Replace every !`command` by what it prints, run in `cwd` in `sandbox(command)` (killed after
    a timeout)."""
    snippets = shell_snippets(text)
    if not snippets:
        return text
    outputs = await asyncio.gather(
        *(_snippet_output(command, cwd, env, sandbox(command)) for command in snippets)
    )
    replacements = dict(zip(snippets, outputs, strict=True))
    return _SHELL_SNIPPET.sub(lambda match: replacements[match.group(1)], text)


async def _snippet_output(command: str, cwd: Path, env: dict[str, str], sandbox: CommandSandbox) -> str:
    chunks: list[bytes] = []

    async def collect(chunk: bytes) -> None:
        chunks.append(chunk)

    try:
        outcome = await run_process_group(
            [default_shell(), "-c", command],
            cwd=cwd,
            env=env,
            time_limit=SHELL_SNIPPET_TIMEOUT_SECONDS,
            abort=asyncio.Event(),
            on_output=collect,
            sandbox=sandbox,
        )
    except OSError as exc:
        return f"Error running `{command}`: {exc.strerror or exc}"
    except SandboxRefusedError as exc:
        return f"Error running `{command}`: {exc}"
    output = b"".join(chunks).decode("utf-8", errors="replace").strip()
    if outcome.ending == "timeout":
        output += f"\n(`{command}` timed out after {SHELL_SNIPPET_TIMEOUT_SECONDS:g} s)"
    return output


def _snippet_sandbox(scope: TenantScope, agent: Agent, command: str) -> CommandSandbox:
    """A snippet runs in the tenant's sandbox, with the network where the tenant has it and the
    agent's `network` rules do not deny this command (like the shell route: nobody is asked)."""
    network = evaluate("network", command, agent.permission).action != "deny"
    return scope.confinement.sandbox.command(network=network)


# -- running ------------------------------------------------------------------------------------


def _model_input(catalog: ProviderCatalog, model: str) -> ModelInput:
    try:
        provider_id, model_id = catalog.parse(model)
    except UnknownModelError as exc:
        raise InvalidInputError(str(exc)) from None
    return ModelInput(provider_id=provider_id, model_id=model_id)


class CommandRunner:
    """Runs commands in the sessions of one tenant."""

    def __init__(self, prompts: SessionPrompt) -> None:
        self.prompts = prompts
        self.sessions = prompts.sessions
        self.services = prompts.services

    async def run(self, session_id: str, body: CommandInput) -> WithParts:
        self.services.runners.admit()  # before a snippet runs or anything is stored
        session = await self.sessions.get(session_id)
        scope = await self.sessions.scope()
        workspace = Path(session.directory)
        command = await self._find(scope, session_id, body.command, workspace)
        agent = self._agent(scope, command.agent or body.agent or scope.agents.default_name)
        template = expand(command.template, body.arguments)
        access = RequestAccess.of(
            permissions=self.services.permissions,
            tenant_id=self.sessions.tenant_id,
            confinement=scope.confinement,
            data_dir=scope.settings.data_dir,
            session=session,
            message_id=body.message_id or ids.ascending("msg"),
            agent=agent,
        )
        # Snippets run commands: refused without the tenant's grant, or naming paths it may not.
        for snippet in shell_snippets(template):
            await access.command(snippet)
        env = scope.confinement.env.build(
            await shell_env(self.services.plugins, cwd=workspace, session_id=session_id, call_id=None)
        )
        text = await run_shell_snippets(
            template, cwd=workspace, env=env, sandbox=lambda snippet: _snippet_sandbox(scope, agent, snippet)
        )
        model = self._model(scope.catalog, command, agent, body)
        agent_names = [a.name for a in scope.agents.list()]
        if (agent.mode == "subagent" and command.subtask is not False) or command.subtask is True:
            prompt = self._subtask_prompt(scope.catalog, command, agent, text, model, body)
        else:
            parts: list[PartInput] = [
                *await prompt_parts(text, access=access, agents=agent_names),
                *body.parts,
            ]
            prompt = PromptInput(
                message_id=body.message_id, model=model, agent=agent.name, variant=body.variant, parts=parts
            )
        reply = await self.prompts.prompt(session_id, prompt)
        self._published(command, session_id, body.arguments, reply.info.id)
        return reply

    async def _find(self, scope: TenantScope, session_id: str, name: str, workspace: Path) -> Command:
        commands = {
            command.name: command for command in await list_commands(scope.settings.config, workspace)
        }
        command = commands.get(name)
        if command is None:
            available = ", ".join(commands) or "none"
            message = f'Command not found: "{name}". Available commands: {available}'
            self.sessions.events.session_error(session_id, unknown_error(message).wire())
            raise InvalidInputError(message)
        return command

    def _agent(self, scope: TenantScope, name: str) -> Agent:
        try:
            return scope.agents.get(name)
        except UnknownAgentError as exc:
            raise InvalidInputError(str(exc)) from None

    def _model(
        self, catalog: ProviderCatalog, command: Command, agent: Agent, body: CommandInput
    ) -> ModelInput | None:
        """The command's model, else its agent's, else the request's; None leaves the choice to the
        prompt (the session's last model)."""
        if command.model:
            return _model_input(catalog, command.model)
        if command.agent and agent.model:
            return _model_input(catalog, agent.model)
        if body.model:
            return _model_input(catalog, body.model)
        return None

    def _subtask_prompt(
        self,
        catalog: ProviderCatalog,
        command: Command,
        agent: Agent,
        text: str,
        model: ModelInput | None,
        body: CommandInput,
    ) -> PromptInput:
        """The whole template goes to the subagent; the user message keeps the caller's agent and model."""
        subtask = SubtaskPartInput(
            type="subtask",
            agent=agent.name,
            description=command.description or command.name,
            command=command.name,
            model=ModelRef(provider_id=model.provider_id, model_id=model.model_id) if model else None,
            prompt=text,
        )
        caller_model = _model_input(catalog, body.model) if body.model else None
        return PromptInput(
            message_id=body.message_id,
            model=caller_model,
            agent=body.agent,
            variant=body.variant,
            parts=[subtask],
        )

    def _published(self, command: Command, session_id: str, arguments: str, message_id: str) -> None:
        self.services.bus.publish(
            Event(
                type=COMMAND_EXECUTED,
                properties={
                    "name": command.name,
                    "sessionID": session_id,
                    "arguments": arguments,
                    "messageID": message_id,
                },
                session_id=session_id,
                tenant_id=self.sessions.tenant_id,
            )
        )
