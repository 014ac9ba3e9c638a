"""The `invalid` tool: where the session layer routes calls it had to repair (unknown tool name,
unparseable arguments), so the model gets a readable explanation instead of a crash."""

from __future__ import annotations

from pydantic import Field

from agentforge.tools.base import Tool, ToolContext, ToolResult
from agentforge.tools.params import ToolParams


class InvalidParams(ToolParams):
    tool: str = Field(description="The tool the model tried to call.")
    error: str = Field(description="What was wrong with the call.")


class InvalidTool(Tool[InvalidParams]):
    id = "invalid"
    changes_files = False  # it only answers the model: no file changes
    description = "Do not use"
    parameters = InvalidParams

    async def execute(self, args: InvalidParams, ctx: ToolContext) -> ToolResult:
        return ToolResult(
            title="Invalid Tool",
            output=f"The arguments provided to the tool are invalid: {args.error}",
            metadata={},
        )
