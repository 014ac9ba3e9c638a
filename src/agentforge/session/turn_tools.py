"""The tool table of one model call, and how a tool call's context is built."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from agentforge.llm.messages import ToolSpec
from agentforge.model.message import AssistantMessage, WithParts
from agentforge.model.part import ToolPart, ToolStatePending
from agentforge.permission.gate import TurnPermissions
from agentforge.plugins.manager import PluginManager
from agentforge.tools.base import AskPermission, Tool
from agentforge.tools.confinement import Confinement
from agentforge.tools.services import ToolServices

INVALID_TOOL = "invalid"
# KERNEL 5.7: this many identical calls in a row (same tool, same input) ask `doom_loop`.
DOOM_LOOP_THRESHOLD: Final = 3

# A tool call as the doom-loop check compares them: the tool's name and its input.
CallSignature = tuple[str, dict[str, Any]]


@dataclass(slots=True)
class TurnTools:
    """Tools the model may call in this step (plus `invalid`, the target of repaired calls), and
    what their calls' contexts are built from.

    `permissions` binds the calls' `ask` to the permission service with this turn's rules;
    `confinement` is the tenant's (its scope's, never built here); `services` are lent to every
    call; `plugins` wrap each call in the `tool_execute_*` hooks. `earlier_calls` are the calls
    this turn made in previous steps, oldest first. `before_run` is awaited before each call that
    may change the workspace's files runs (the step's snapshot, session/snapshots.py).
    """

    tools: dict[str, Tool[Any]]
    directory: Path
    data_dir: Path
    agent: str
    permissions: TurnPermissions
    confinement: Confinement
    services: ToolServices
    plugins: PluginManager
    earlier_calls: list[CallSignature] = field(default_factory=list)
    before_run: Callable[[], Awaitable[None]] | None = None

    def ask_for(self, message_id: str, call_id: str) -> AskPermission:
        return self.permissions.for_call(message_id, call_id)

    def reject_waiting(self) -> None:
        self.permissions.reject_waiting()

    def visible(self) -> list[Tool[Any]]:
        """The tools the model is told about: all but `invalid`, which only repaired calls reach."""
        return [tool for name, tool in self.tools.items() if name != INVALID_TOOL]

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name=tool.id, description=tool.description, parameters=tool.json_schema())
            for tool in self.visible()
        ]

    def repair(self, name: str, input_text: str) -> tuple[str, dict[str, Any]]:
        """KERNEL 5.6 tool-call repair: fix a case-only name mismatch, else route to `invalid`."""
        try:
            parsed = orjson.loads(input_text) if input_text.strip() else {}
        except orjson.JSONDecodeError as exc:
            return INVALID_TOOL, {"tool": name, "error": f"arguments are not valid JSON ({exc})"}
        if not isinstance(parsed, dict):
            return INVALID_TOOL, {"tool": name, "error": "arguments must be a JSON object"}
        if name in self.tools and name != INVALID_TOOL:
            return name, parsed
        lowered = name.lower()
        if lowered in self.tools and lowered != INVALID_TOOL:
            return lowered, parsed
        available = ", ".join(sorted(n for n in self.tools if n != INVALID_TOOL))
        return INVALID_TOOL, {
            "tool": name,
            "error": f"Model tried to call unavailable tool '{name}'. Available tools: {available}.",
        }


def calls_since(history: Sequence[WithParts], user_id: str) -> list[CallSignature]:
    """The tool calls (with their input known) of the replies to the user message `user_id`."""
    calls: list[CallSignature] = []
    for item in history:
        if not isinstance(item.info, AssistantMessage) or item.info.parent_id != user_id:
            continue
        for part in item.parts:
            if isinstance(part, ToolPart) and not isinstance(part.state, ToolStatePending):
                calls.append((part.tool, part.state.input))
    return calls


def is_doom_loop(calls: Sequence[CallSignature]) -> bool:
    """The last DOOM_LOOP_THRESHOLD calls are one tool called with one input."""
    if len(calls) < DOOM_LOOP_THRESHOLD:
        return False
    last = calls[-DOOM_LOOP_THRESHOLD:]
    return all(call == last[-1] for call in last)
