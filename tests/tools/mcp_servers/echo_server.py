"""A small MCP server for the tests: run as a script it serves stdio; `build_server()` is also
mounted over streamable HTTP in-process.

Tools: `echo` (text), `picture` (an image), `archive` (an embedded binary resource), `fail` (an
`isError` result), `slow` (sleeps; writes "cancelled" to `marker` when its request is cancelled),
`exit` (the process dies mid-call), `whereami` (working directory and one environment variable) and
`get.weather` (a name that needs sanitising).
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import anyio
import mcp_types
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
ARCHIVE_BYTES = b"PK\x03\x04 not really a zip"


def record(marker: str, state: str) -> None:
    Path(marker).write_text(state)


def build_server() -> MCPServer:
    server = MCPServer("echo", log_level="WARNING")

    @server.tool(description="Repeat the text back.")
    def echo(text: str, times: int = 1) -> str:
        return " ".join([f"echo: {text}"] * times)

    @server.tool(description="A tiny PNG.")
    def picture() -> Image:
        return Image(data=PNG_BYTES, format="png")

    @server.tool(description="A binary resource with some text.")
    def archive() -> mcp_types.CallToolResult:
        blob = mcp_types.BlobResourceContents(
            uri="file:///data/report.zip",
            mime_type="application/zip",
            blob=base64.b64encode(ARCHIVE_BYTES).decode(),
        )
        return mcp_types.CallToolResult(
            content=[
                mcp_types.TextContent(text="here is the archive"),
                mcp_types.EmbeddedResource(resource=blob),
            ]
        )

    @server.tool(description="Always fails with the given reason.")
    def fail(reason: str) -> str:
        raise ToolError(reason)

    @server.tool(description="Sleep, recording in `marker` whether the request was cancelled.")
    async def slow(seconds: float, marker: str) -> str:
        record(marker, "started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            record(marker, "cancelled")  # synchronous: an await here would be cancelled too
            raise
        record(marker, "finished")
        return "slept"

    @server.tool(description="The server process exits in the middle of this call.")
    def exit(code: int = 3) -> str:
        sys.stderr.write("echo server: exiting on request\n")
        sys.stderr.flush()
        os._exit(code)

    @server.tool(description="Where the server runs and the value of one environment variable.")
    def whereami(variable: str) -> str:
        return f"{os.getcwd()} {variable}={os.environ.get(variable, '<unset>')}"

    @server.tool(name="get.weather", description="Weather for a city.")
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    return server


if __name__ == "__main__":
    build_server().run()
