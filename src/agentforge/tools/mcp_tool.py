"""An MCP server's tool as one of ours (KERNEL 7.1): named `<server>_<tool>`, gated by a permission
of that name, its result turned into text for the model plus attachments for images and blobs.
"""

from __future__ import annotations

import re
from typing import Any

import mcp_types
import orjson

from agentforge.tools.base import (
    Attachment,
    PermissionRequest,
    RawSchemaTool,
    ToolContext,
    ToolError,
    ToolResult,
)
from agentforge.tools.mcp_connection import McpConnection

# Providers accept only these characters in tool names, and at most 64 of them (OpenAI).
_UNSAFE_NAME_CHARACTERS = re.compile(r"[^a-zA-Z0-9_-]")
MAX_TOOL_NAME = 64
_DEFAULT_BLOB_MIME = "application/octet-stream"


def tool_key(server: str, tool: str) -> str:
    """The name the model sees and the permission key: `<server>_<tool>`, sanitised."""
    key = f"{_UNSAFE_NAME_CHARACTERS.sub('_', server)}_{_UNSAFE_NAME_CHARACTERS.sub('_', tool)}"
    return key[:MAX_TOOL_NAME]


def model_schema(input_schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema as the model should see it: always an object with properties."""
    schema = {key: value for key, value in input_schema.items() if key != "title"}
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


class McpTool(RawSchemaTool):
    def __init__(self, key: str, connection: McpConnection, listed: mcp_types.Tool) -> None:
        super().__init__(
            id=key,
            description=listed.description or listed.title or "",
            schema=model_schema(listed.input_schema),
        )
        self.server = connection.name
        self.remote_name = listed.name
        self._connection = connection

    def reconnected(self, connection: McpConnection) -> None:
        """Call the server through `connection` from now on (it was connected again)."""
        self._connection = connection

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await ctx.ask(PermissionRequest(permission=self.id, patterns=["*"], always=["*"]))
        result = await self._connection.call_tool(self.remote_name, args)
        return tool_result(self.id, result)


def tool_result(key: str, result: mcp_types.CallToolResult) -> ToolResult:
    """Text blocks joined for the model; images, audio and binary resources become attachments.

    An `isError` result is the tool's own failure: it becomes the error the model sees.
    """
    texts: list[str] = []
    attachments: list[Attachment] = []
    for block in result.content:
        text, attachment = _convert(block)
        if text:
            texts.append(text)
        if attachment is not None:
            attachments.append(attachment)
    if not texts and result.structured_content is not None:
        texts.append(orjson.dumps(result.structured_content).decode())
    output = "\n\n".join(texts)
    if result.is_error:
        raise ToolError(output or f"The {key} tool failed without saying why")
    return ToolResult(output=output, title="", attachments=attachments)


def _convert(block: mcp_types.ContentBlock) -> tuple[str | None, Attachment | None]:
    if isinstance(block, mcp_types.TextContent):
        return block.text, None
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return None, Attachment(mime=block.mime_type, url=_data_url(block.mime_type, block.data))
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text, None
        mime = resource.mime_type or _DEFAULT_BLOB_MIME
        url = _data_url(mime, resource.blob)
        return None, Attachment(mime=mime, url=url, filename=_filename(resource.uri))
    # A resource link: the model can at least tell the user where the content lives.
    return f"Resource {block.name}: {block.uri}", None


def _data_url(mime: str, base64_data: str) -> str:
    return f"data:{mime};base64,{base64_data}"


def _filename(uri: object) -> str | None:
    name = str(uri).rstrip("/").rsplit("/", 1)[-1]
    return name or None
