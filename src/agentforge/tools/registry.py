"""The tool registry and per-model filtering (KERNEL 7.2).

Registration alone does not show a tool to a model: `for_model` applies the provider/model rules,
and later layers (agent permissions, per-prompt tool switches) filter again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from agentforge.llm.messages import ToolSpec
from agentforge.tools.base import Tool

SEARCH_TOOLS = frozenset({"websearch", "codesearch"})
SEARCH_PROVIDERS = frozenset({"opencode"})
PATCH_TOOL = "apply_patch"
FILE_EDIT_TOOLS = frozenset({"edit", "write"})


class ToolSource(Protocol):
    """Where tools come from (the plugin manager); a protocol so tools/ need not import plugins/."""

    def tools(self) -> list[Tool[Any]]: ...


def prefers_apply_patch(model_id: str) -> bool:
    """GPT models (except the gpt-4 family and open-weight gpt-oss) edit through apply_patch."""
    model = model_id.lower()
    return "gpt-" in model and "oss" not in model and "gpt-4" not in model


class ToolRegistry:
    """Tools by id, in registration order; a later tool with the same id replaces the earlier one."""

    def __init__(self, tools: Iterable[Tool[Any]] = (), *, enable_search: bool = False) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self.enable_search = enable_search
        for tool in tools:
            self.register(tool)

    @classmethod
    def builtin(cls, *, enable_search: bool = False) -> ToolRegistry:
        from agentforge.tools.builtin import builtin_tools

        return cls(builtin_tools(), enable_search=enable_search)

    @classmethod
    def from_plugins(cls, plugins: ToolSource, *, enable_search: bool = False) -> ToolRegistry:
        """Every plugin's tools: the built-ins (the built-in plugin) and custom ones, later overriding."""
        return cls(plugins.tools(), enable_search=enable_search)

    def register(self, tool: Tool[Any]) -> None:
        # Keep the original position when overriding so the model sees a stable tool order.
        self._tools[tool.id] = tool

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def all(self) -> list[Tool[Any]]:
        return list(self._tools.values())

    def for_model(self, provider_id: str, model_id: str) -> list[Tool[Any]]:
        """The tools that make sense for this provider/model (the `invalid` tool always stays)."""
        patch_instead_of_edit = prefers_apply_patch(model_id) and PATCH_TOOL in self._tools
        search_allowed = self.enable_search or provider_id in SEARCH_PROVIDERS
        chosen: list[Tool[Any]] = []
        for tool in self._tools.values():
            if tool.id in SEARCH_TOOLS and not search_allowed:
                continue
            if tool.id == PATCH_TOOL and not patch_instead_of_edit:
                continue
            if tool.id in FILE_EDIT_TOOLS and patch_instead_of_edit:
                continue
            chosen.append(tool)
        return chosen


def specs(tools: Iterable[Tool[Any]]) -> list[ToolSpec]:
    """What the model is told about each tool: name, description and the JSON Schema we validate with."""
    return [
        ToolSpec(name=tool.id, description=tool.description, parameters=tool.json_schema()) for tool in tools
    ]
