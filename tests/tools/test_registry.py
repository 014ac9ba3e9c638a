from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from agentforge.tools.base import Tool, ToolContext, ToolResult
from agentforge.tools.builtin import builtin_tools
from agentforge.tools.builtin.read import ReadTool
from agentforge.tools.params import ToolParams
from agentforge.tools.registry import ToolRegistry, specs


class NoParams(ToolParams):
    pass


def make_tool(tool_id: str, text: str = "") -> Tool[NoParams]:
    class Named(Tool[NoParams]):
        id = tool_id
        description = text or f"The {tool_id} tool"
        parameters: ClassVar[type[BaseModel]] = NoParams

        async def execute(self, args: NoParams, ctx: ToolContext) -> ToolResult:
            return ToolResult(output=tool_id)

    return Named()


def test_builtin_registry_has_every_builtin_in_kernel_order() -> None:
    registry = ToolRegistry.builtin()
    assert registry.names() == [
        "invalid",
        "question",
        "bash",
        "read",
        "glob",
        "grep",
        "list",
        "edit",
        "write",
        "task",
        "webfetch",
        "todowrite",
        "todoread",
        "apply_patch",
    ]
    assert [tool.id for tool in builtin_tools()] == registry.names()


def test_get_returns_the_tool_or_none() -> None:
    registry = ToolRegistry.builtin()
    read = registry.get("read")
    assert read is not None and read.id == "read"
    assert registry.get("nope") is None


def test_later_registration_overrides_in_place() -> None:
    registry = ToolRegistry([make_tool("a"), make_tool("b", "first b"), make_tool("c")])
    registry.register(make_tool("b", "second b"))
    registry.register(make_tool("d"))
    assert registry.names() == ["a", "b", "c", "d"]
    replaced = registry.get("b")
    assert replaced is not None and replaced.description == "second b"


def test_for_model_keeps_edit_and_write_when_no_apply_patch_exists() -> None:
    registry = ToolRegistry([tool for tool in builtin_tools() if tool.id != "apply_patch"])
    names = [tool.id for tool in registry.for_model("openai", "gpt-5")]
    assert "edit" in names and "write" in names
    assert "invalid" in names


def test_builtin_apply_patch_replaces_edit_and_write_for_gpt_models_only() -> None:
    registry = ToolRegistry.builtin()
    gpt5 = [tool.id for tool in registry.for_model("openai", "gpt-5")]
    assert "apply_patch" in gpt5 and "edit" not in gpt5 and "write" not in gpt5
    claude = [tool.id for tool in registry.for_model("anthropic", "claude-sonnet-4")]
    assert "apply_patch" not in claude and "edit" in claude and "write" in claude


def test_gpt_models_get_apply_patch_instead_of_edit_and_write() -> None:
    registry = ToolRegistry.builtin()
    registry.register(make_tool("apply_patch"))
    gpt5 = [tool.id for tool in registry.for_model("openai", "gpt-5-codex")]
    assert "apply_patch" in gpt5 and "edit" not in gpt5 and "write" not in gpt5
    for model in ("gpt-4o", "gpt-oss-120b", "claude-sonnet-4"):
        names = [tool.id for tool in registry.for_model("openai", model)]
        assert "apply_patch" not in names and "edit" in names and "write" in names, model


def test_search_tools_only_for_opencode_provider_or_flag() -> None:
    tools = [make_tool("read"), make_tool("websearch"), make_tool("codesearch")]
    plain = ToolRegistry(tools)
    assert [t.id for t in plain.for_model("anthropic", "claude")] == ["read"]
    assert [t.id for t in plain.for_model("opencode", "claude")] == ["read", "websearch", "codesearch"]
    flagged = ToolRegistry(tools, enable_search=True)
    assert [t.id for t in flagged.for_model("anthropic", "claude")] == ["read", "websearch", "codesearch"]


def test_specs_use_wire_names_and_drop_generated_titles() -> None:
    registry = ToolRegistry.builtin()
    read = registry.get("read")
    assert read is not None
    [spec] = specs([read])
    assert spec.name == "read"
    assert spec.description == read.description
    assert spec.parameters["type"] == "object"
    assert spec.parameters["required"] == ["filePath"]
    assert set(spec.parameters["properties"]) == {"filePath", "offset", "limit"}
    assert "title" not in spec.parameters
    assert all("title" not in prop for prop in spec.parameters["properties"].values())
    assert spec.parameters["properties"]["filePath"]["description"]


def test_every_builtin_schema_validates_as_json_schema() -> None:
    from jsonschema import Draft202012Validator

    for spec in specs(ToolRegistry.builtin().all()):
        Draft202012Validator.check_schema(spec.parameters)
        assert spec.description


def test_only_the_tools_that_just_read_skip_the_write_ahead() -> None:
    """`has_effects` decides whether a call waits for its start to be stored (session/tool_calls.py):
    every built-in but the four readers has effects, and so does any tool that does not say."""
    registry = ToolRegistry.builtin(enable_search=True)
    tools = [registry.get(name) for name in registry.names()]
    effect_free = {tool.id for tool in tools if tool is not None and not tool.has_effects}
    assert effect_free == {"read", "glob", "grep", "list"}
    assert make_tool("custom").has_effects

    class ReadAndTell(ReadTool):  # a subclass says so itself: what it adds may have effects
        pass

    assert ReadAndTell().has_effects and not ReadTool().has_effects


def test_only_the_tools_that_never_write_a_file_skip_the_snapshot() -> None:
    """`changes_files` decides whether a step's call waits for its snapshot (session/snapshots.py):
    the readers, the web fetch, the todo list, questions and `invalid` never write a file; every
    other built-in may, and so does any tool that does not say."""
    registry = ToolRegistry.builtin(enable_search=True)
    tools = [registry.get(name) for name in registry.names()]
    never_write = {tool.id for tool in tools if tool is not None and not tool.changes_files}
    assert never_write == {
        "read",
        "glob",
        "grep",
        "list",
        "webfetch",
        "todoread",
        "todowrite",
        "question",
        "invalid",
    }
    assert make_tool("custom").changes_files

    class ReadAndWrite(ReadTool):  # a subclass says so itself: what it adds may write
        pass

    assert ReadAndWrite().changes_files and not ReadTool().changes_files
