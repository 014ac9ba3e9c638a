"""The tool table of one model call, and how a tool call's context is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentforge.llm.messages import ToolSpec
from agentforge.tools.base import AskPermission, Tool, _allow_everything

INVALID_TOOL = "invalid"


@dataclass(slots=True)
class TurnTools:
    """Tools the model may call in this step (plus `invalid`, the target of repaired calls)."""

    tools: dict[str, Tool[Any]]
    directory: Path
    data_dir: Path
    agent: str
    ask: AskPermission = _allow_everything
    extra: dict[str, Any] = field(default_factory=dict)

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name=tool.id, description=tool.description, parameters=tool.json_schema())
            for name, tool in self.tools.items()
            if name != INVALID_TOOL
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
