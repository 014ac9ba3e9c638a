"""The hooks a plugin may implement (KERNEL 9), as pluggy specifications of the project "agentforge".

Every hook gets its inputs as keyword arguments; a plugin declares only the ones it needs (pluggy
passes an implementation just the arguments it names). Mutating hooks also get `output`, a dataclass the
plugin changes in place; the next plugin sees the change, and the caller reads the final value.

Implementations run one after another in registration order (built-ins, then entry points, then the
config's `plugin` list; `tryfirst`/`trylast` move one to the front or back), so the plugin loaded last has
the last word. An implementation may be a coroutine function: the manager awaits it before calling the
next one. `event` and `register_tools` are called from synchronous code and must be synchronous.

Errors: an exception raised in a mutating hook propagates to the caller (in `tool_execute_before` a
`ToolError` blocks the call and its message goes to the model); an exception in the observer hook `event`
is logged and skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pluggy

from agentforge.llm.provider import ResolvedModel
from agentforge.model.events import Event
from agentforge.model.message import UserMessage, WithParts
from agentforge.model.part import ModelRef, Part
from agentforge.tools.base import PermissionRequest, Tool

PROJECT = "agentforge"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

PermissionStatus = Literal["ask", "allow", "deny"]


@dataclass(slots=True)
class ChatMessage:
    """A new user message and its parts, before they are saved."""

    message: UserMessage
    parts: list[Part]


@dataclass(slots=True)
class ChatParams:
    """Sampling parameters of one model call; `options` are provider options passed through."""

    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ChatHeaders:
    """Extra HTTP headers of one model call."""

    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class SystemPrompt:
    """The system prompt pieces of one model call, in order."""

    system: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Messages:
    """The effective history (messages with their parts) before it is converted for the model."""

    messages: list[WithParts] = field(default_factory=list)


@dataclass(slots=True)
class ToolDefinition:
    """What the model is told about one tool: its description and the JSON Schema of its parameters."""

    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ToolArgs:
    """The arguments of one tool call, before they are validated."""

    args: dict[str, Any]


@dataclass(slots=True)
class ToolOutput:
    """What one finished tool call hands back to the model (after truncation)."""

    title: str
    output: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PermissionDecision:
    """A plugin's answer to a permission request: `ask` leaves it to the rules and the person."""

    status: PermissionStatus = "ask"


@dataclass(slots=True)
class ShellEnv:
    """Variables added to the environment of shell commands (bash tool, user shell)."""

    env: dict[str, str] = field(default_factory=dict)


# The specifications. Their bodies never run: pluggy reads only their names and signatures.


@hookspec
def chat_message(session_id: str, agent: str, model: ModelRef, output: ChatMessage) -> None:
    """A user message is about to be saved; change `output.message` or `output.parts`."""


@hookspec
def chat_params(session_id: str, agent: str, model: ResolvedModel, output: ChatParams) -> None:
    """A model call is about to be made; change its sampling parameters and provider options."""


@hookspec
def chat_headers(session_id: str, agent: str, model: ResolvedModel, output: ChatHeaders) -> None:
    """A model call is about to be made; add or change its HTTP headers."""


@hookspec
def system_transform(session_id: str, model: ResolvedModel, output: SystemPrompt) -> None:
    """Rewrite the system prompt pieces of a model call."""


@hookspec
def messages_transform(session_id: str, output: Messages) -> None:
    """Rewrite the history a model call is built from (before conversion to model messages)."""


@hookspec
def tool_definition(tool_id: str, output: ToolDefinition) -> None:
    """Change the description or parameter schema the model sees for a tool."""


@hookspec
def tool_execute_before(tool: str, session_id: str, call_id: str, output: ToolArgs) -> None:
    """A tool call is about to run; change `output.args`, or raise `ToolError` to block the call (its
    message goes to the model; `PermissionDeniedError` also ends the turn after this step)."""


@hookspec
def tool_execute_after(
    tool: str, session_id: str, call_id: str, args: dict[str, Any], output: ToolOutput
) -> None:
    """A tool call finished; change the title, output or metadata the model and clients see."""


@hookspec
def permission_ask(request: PermissionRequest, session_id: str, output: PermissionDecision) -> None:
    """The rules say `ask`; set `output.status` to "allow" or "deny" to decide without a person."""


@hookspec
def event(event: Event) -> None:
    """Observe every bus event. Synchronous, and must not block: it runs on the publisher's path."""


@hookspec
def shell_env(cwd: Path, session_id: str | None, call_id: str | None, output: ShellEnv) -> None:
    """A shell command is about to start in `cwd`; add variables to `output.env`."""


@hookspec
def register_tools() -> list[Tool[Any]]:
    """Custom Python tools. Synchronous; the lists of all plugins are concatenated, and a tool with the
    same id as an earlier one (a built-in, say) replaces it."""
    return []
