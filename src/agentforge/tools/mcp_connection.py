"""One MCP server connection, held open by a task of its own.

The SDK's transports are anyio task groups, which must be entered and left by the same task; a
dedicated holder task enters the client, reports the listed tools, then waits until `close()`. Tool
calls are made from any task (the session's), and cancelling that task cancels the request: the SDK
sends `notifications/cancelled` to the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from agentforge.tools.base import ToolError
from agentforge.tools.confinement import ProcessEnv
from agentforge.tools.mcp_config import LocalServerConfig, RemoteServerConfig
from agentforge.tools.mcp_stderr import StderrTail
from agentforge.tools.sandbox import UNSANDBOXED, Sandbox
from agentforge.version import __version__

log = logging.getLogger("agentforge.mcp")

_MAX_TOOL_PAGES = 100  # a server whose pagination never ends cannot hold start-up forever
_CLOSE_TIMEOUT = 10.0  # the SDK bounds its own shutdown (stdin close, SIGTERM, SIGKILL) well below this
_STDERR_SETTLE = 1.0
_HTTP_READ_TIMEOUT = 300.0  # a streamable-HTTP response may be an SSE stream that stays open


class McpConnectError(Exception):
    """The server could not be started, reached or listed; the message is the reason."""


class McpServerUnavailableError(ToolError):
    """A tool call found its server gone: tell the model (and the user) which one and why."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(
            f"MCP server {server} is not connected: {reason}. "
            f"Check the `mcp.{server}` entry in the config and restart agentforge to reconnect."
        )


class McpConnection:
    def __init__(
        self,
        name: str,
        config: LocalServerConfig | RemoteServerConfig,
        *,
        directory: Path,
        env: ProcessEnv | None = None,
        sandbox: Sandbox = UNSANDBOXED,
    ) -> None:
        """`env` is the tenant's process environment; a stdio server starts with its clean form
        (never the server's own variables, see mcp_config) plus its `environment` config, inside
        the tenant's `sandbox` (the local user's own servers run outside it: `for_mcp_server`)."""
        self.name = name
        self.config = config
        self.directory = directory
        self.env = env or ProcessEnv()
        self.sandbox = sandbox
        self.error: str | None = None
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None
        self._stderr: StderrTail | None = None

    @property
    def connected(self) -> bool:
        return self._client is not None and self.error is None

    async def open(self) -> list[mcp_types.Tool]:
        """Start or reach the server and list its tools. Raises McpConnectError with the reason."""
        ready: asyncio.Future[list[mcp_types.Tool]] = asyncio.get_running_loop().create_future()
        self._holder = asyncio.create_task(self._hold(ready), name=f"mcp:{self.name}")
        try:
            return await ready
        except BaseException as error:
            self.error = str(error) if isinstance(error, McpConnectError) else "start-up was interrupted"
            await self.close()
            raise

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        client = self._client
        if client is None or self.error is not None:
            raise McpServerUnavailableError(self.name, self.error or "the connection is closed")
        timeout = self.config.call_timeout
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as error:
            if error.code == mcp_types.CONNECTION_CLOSED:
                raise McpServerUnavailableError(self.name, await self._lost(error)) from None
            if error.code == mcp_types.REQUEST_TIMEOUT:
                raise ToolError(
                    f"MCP server {self.name} did not answer the {tool} call within {timeout:g}s "
                    "(the call was cancelled)"
                ) from None
            raise ToolError(f"MCP server {self.name} refused the {tool} call: {error.message}") from None
        except httpx2.HTTPError as error:
            raise McpServerUnavailableError(self.name, await self._lost(error)) from None

    async def close(self) -> None:
        self._stop.set()
        holder = self._holder
        if holder is not None and not holder.done():
            try:
                await asyncio.wait_for(asyncio.shield(holder), _CLOSE_TIMEOUT)
            except TimeoutError:
                log.warning("MCP server %s did not shut down in time; abandoning it", self.name)
                holder.cancel()
                with contextlib.suppress(BaseException):
                    await holder
        if self._stderr is not None:
            await self._stderr.close()

    async def _hold(self, ready: asyncio.Future[list[mcp_types.Tool]]) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                client, tools = await self._connect_and_list(stack)
                self._client = client
                ready.set_result(tools)
                await self._stop.wait()
        except Exception as error:
            if not ready.done():
                ready.set_exception(McpConnectError(await self._explain(error)))
            elif self._stop.is_set():  # a teardown hiccup (e.g. the session DELETE failed): nothing to report
                log.debug("MCP server %s closed with an error: %s", self.name, _describe(error))
            else:
                await self._lost(error)
        finally:
            self._client = None
            if not ready.done():
                ready.set_exception(McpConnectError("closed before it finished connecting"))

    async def _connect_and_list(
        self, stack: contextlib.AsyncExitStack
    ) -> tuple[Client, list[mcp_types.Tool]]:
        try:
            async with asyncio.timeout(self.config.timeout):
                client = Client(
                    await self._transport(stack),
                    client_info=mcp_types.Implementation(name="agentforge", version=__version__),
                )
                await stack.enter_async_context(client)
                return client, await _list_all_tools(client)
        except TimeoutError:
            raise McpConnectError(f"no answer within {self.config.timeout:g}s") from None
        finally:
            if self._stderr is not None:
                self._stderr.release_sink()  # spawned (or failed): EOF on the pipe now means it exited

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Transport:
        if isinstance(self.config, LocalServerConfig):
            self._stderr = StderrTail(self.name)
            await self._stderr.start()
            # The network where the tenant has it (sandbox.network): servers often call remote APIs.
            jail = self.sandbox.for_mcp_server(network=True)
            command, *args = await asyncio.to_thread(jail.wrap, self.config.command, self.directory)
            # The SDK lays this over its own secret-free base (HOME, PATH, USER, SHELL, ...).
            env = self.env.clean().build(self.config.environment)
            parameters = StdioServerParameters(command=command, args=args, env=env, cwd=self.directory)
            return stdio_client(parameters, errlog=self._stderr.sink)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=self.config.headers,
                timeout=httpx2.Timeout(self.config.timeout, read=_HTTP_READ_TIMEOUT),
            )
        )
        return streamable_http_client(self.config.url, http_client=http)

    async def _lost(self, error: BaseException) -> str:
        """Record that the server went away (its stderr usually says why) and return the reason."""
        if self.error is None:
            self.error = await self._explain(error)
            log.warning("MCP server %s disconnected: %s", self.name, self.error)
        return self.error

    async def _explain(self, error: BaseException) -> str:
        reason = _describe(error)
        if isinstance(self.config, RemoteServerConfig):
            return f"{self.config.url}: {reason}"
        stderr = await self._stderr.settle(_STDERR_SETTLE) if self._stderr is not None else ""
        return f"{reason}; server stderr:\n{stderr}" if stderr else reason


async def _list_all_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _describe(error: BaseException) -> str:
    """The innermost meaningful message: anyio task groups wrap failures in exception groups."""
    leaf = next(_leaves(error), error)
    if isinstance(leaf, McpConnectError):
        return str(leaf)
    if isinstance(leaf, FileNotFoundError) and leaf.filename:
        return f"command not found: {leaf.filename}"
    if isinstance(leaf, MCPError):
        return leaf.message
    text = str(leaf).strip()
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error
