"""MCP tool naming, schemas and result conversion, without a server (test_mcp.py has the servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import mcp_types
import pytest

from agentforge.testing.tools import allow_all, tool_context, unconfined
from agentforge.tools.base import ToolError
from agentforge.tools.execute import validate_arguments
from agentforge.tools.mcp_config import LocalServerConfig
from agentforge.tools.mcp_connection import McpConnection
from agentforge.tools.mcp_tool import McpTool, model_schema, tool_key, tool_result


def test_tool_keys_are_sanitised_for_providers() -> None:
    assert tool_key("my server", "get.weather") == "my_server_get_weather"
    assert tool_key("files", "read-file_2") == "files_read-file_2"
    assert len(tool_key("s" * 40, "t" * 40)) == 64


def test_the_model_always_sees_an_object_schema() -> None:
    assert model_schema({"type": "object", "title": "fooArguments"}) == {"type": "object", "properties": {}}
    kept = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert model_schema(kept) == kept


def test_results_without_text_fall_back_to_structured_content() -> None:
    result = mcp_types.CallToolResult(content=[], structured_content={"temperature": 21})
    assert tool_result("w_t", result).output == '{"temperature":21}'


def test_text_blocks_and_text_resources_are_joined() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="first"),
            mcp_types.EmbeddedResource(
                resource=mcp_types.TextResourceContents(uri="file:///notes.txt", text="second")
            ),
            mcp_types.ResourceLink(name="manual", uri="https://example.com/manual"),
        ]
    )
    assert tool_result("k", result).output == "first\n\nsecond\n\nResource manual: https://example.com/manual"


def test_an_error_result_without_text_still_explains_itself() -> None:
    with pytest.raises(ToolError, match="The srv_tool tool failed without saying why"):
        tool_result("srv_tool", mcp_types.CallToolResult(content=[], is_error=True))


def unopened(name: str = "srv") -> McpConnection:
    return McpConnection(name, LocalServerConfig(type="local", command=["unused"]), directory=Path("/"))


def listed_tool(schema: dict[str, Any]) -> mcp_types.Tool:
    return mcp_types.Tool(name="lookup", description="Look things up.", input_schema=schema)


NESTED = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "filter": {
            "type": "object",
            "properties": {"field": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["field"],
        },
    },
    "required": ["query"],
}


def test_arguments_are_validated_against_the_raw_schema_with_readable_errors() -> None:
    tool = McpTool("srv_lookup", unopened(), listed_tool(NESTED))
    assert validate_arguments(tool, {"query": "x", "filter": {"field": "a"}}) == {
        "query": "x",
        "filter": {"field": "a"},
    }
    with pytest.raises(ToolError) as raised:
        validate_arguments(tool, {"filter": {"limit": 0}})
    message = str(raised.value)
    assert "`query` is required" in message
    assert "`filter.field` is required" in message
    assert "`filter.limit` is invalid: 0 is less than the minimum of 1" in message


def test_a_tool_with_a_broken_schema_is_refused_up_front() -> None:
    with pytest.raises(jsonschema.SchemaError):
        McpTool("srv_lookup", unopened(), listed_tool({"type": "object", "properties": {"a": {"type": 5}}}))


async def test_a_tool_whose_server_never_connected_says_so() -> None:
    tool = McpTool("srv_lookup", unopened(), listed_tool(NESTED))
    ctx = tool_context(Path("/"), Path("/"), confinement=unconfined(), ask=allow_all)
    with pytest.raises(ToolError, match="MCP server srv is not connected: the connection is closed"):
        await tool.execute({"query": "x"}, ctx)
