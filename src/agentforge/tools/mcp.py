"""MCP servers as tool sources (KERNEL 7.1): every enabled server in the `mcp` config is started
(stdio) or reached (streamable HTTP) through the official SDK, and its tools join ours as
`<server>_<tool>`.

One server failing never stops the others: it is recorded with its reason in `status()` and its
tools are simply absent. A server that dies later keeps its tools listed; calling one gives the
model a clear "not connected" error instead of a hang.

Use: `manager = McpManager(config_mcp, directory=workspace)`, `await manager.start()` once at
start-up, register `manager.tools()` with the tool registry, `await manager.close()` at shutdown.
A client may `disconnect` a server (its tools stay listed and answer that it is not connected) and
`connect` it again (a fresh connection; tools it lists anew are returned for the registry).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from agentforge.tools.base import Tool
from agentforge.tools.confinement import ProcessEnv
from agentforge.tools.mcp_config import McpConfigError, parse_server_config
from agentforge.tools.sandbox import UNSANDBOXED, Sandbox

if TYPE_CHECKING:
    # The MCP SDK takes about a second to import: only a manager with servers configured loads it.
    import mcp_types

    from agentforge.tools.mcp_connection import McpConnection
    from agentforge.tools.mcp_tool import McpTool

log = logging.getLogger("agentforge.mcp")


class ServerStatus(TypedDict):
    status: Literal["connected", "failed", "disabled"]
    error: NotRequired[str]


class McpManager:
    """The MCP servers of one agentforge process: start them, expose their tools, close them."""

    def __init__(
        self,
        config_mcp: Mapping[str, Any] | None,
        *,
        directory: Path,
        env: ProcessEnv | None = None,
        sandbox: Sandbox = UNSANDBOXED,
    ) -> None:
        """`env`: the environment stdio servers start with (the tenant's; default: the server's);
        `sandbox`: the tenant's OS sandbox, which its stdio servers start in (tools/sandbox.py)."""
        self.directory = directory
        self.env = env or ProcessEnv()
        self.sandbox = sandbox
        self._entries = dict(config_mcp or {})
        self._config_errors: dict[str, str] = {}
        self._disabled: set[str] = set()
        self._connections: dict[str, McpConnection] = {}
        self._tools: dict[str, McpTool] = {}
        self._started = False

    async def start(self) -> None:
        """Connect every enabled server concurrently, each bounded by its own `timeout`."""
        if self._started:
            raise RuntimeError("McpManager.start() was already called")
        self._started = True
        await _load_sdk(self._entries)
        for name, raw in self._entries.items():
            self._prepare(name, raw)
        connections = list(self._connections.values())
        listings = await asyncio.gather(*(self._open(connection) for connection in connections))
        for connection, listed in zip(connections, listings, strict=True):
            self._add_tools(connection, listed)

    def knows(self, name: str) -> bool:
        return name in self._entries

    async def disconnect(self, name: str) -> None:
        """Close the server's connection and mark it disabled until `connect`."""
        connection = self._connections.pop(name, None)
        if connection is not None:
            await connection.close()
        self._disabled.add(name)

    async def connect(self, name: str) -> list[Tool[Any]]:
        """Connect the server again (closing its old connection first); returns its tools that were
        not known before. A server that fails to connect is reported in `status()`."""
        old = self._connections.pop(name, None)
        if old is not None:
            await old.close()
        self._disabled.discard(name)
        self._config_errors.pop(name, None)
        await _load_sdk(self._entries)
        self._prepare(name, self._entries[name])
        connection = self._connections.get(name)
        if connection is None:
            return []
        listed = await self._open(connection)
        for tool in self._tools.values():
            if tool.server == name:
                tool.reconnected(connection)
        known = set(self._tools)
        self._add_tools(connection, listed)
        return [tool for key, tool in self._tools.items() if key not in known]

    def status(self) -> dict[str, ServerStatus]:
        return {name: self._status_of(name) for name in self._entries}

    def tools(self) -> list[Tool[Any]]:
        return list(self._tools.values())

    async def close(self) -> None:
        await asyncio.gather(*(connection.close() for connection in self._connections.values()))

    def _prepare(self, name: str, raw: Any) -> None:
        try:
            config = parse_server_config(name, raw)
        except McpConfigError as error:
            self._config_errors[name] = str(error)
            log.warning("%s", error)
            return
        if not config.enabled:
            self._disabled.add(name)
            return
        from agentforge.tools.mcp_connection import McpConnection

        self._connections[name] = McpConnection(
            name, config, directory=self.directory, env=self.env, sandbox=self.sandbox
        )

    async def _open(self, connection: McpConnection) -> list[mcp_types.Tool]:
        from agentforge.tools.mcp_connection import McpConnectError

        try:
            listed = await connection.open()
        except McpConnectError as error:
            log.warning("MCP server %s failed to start: %s", connection.name, error)
            return []
        log.info("MCP server %s connected with %d tool(s)", connection.name, len(listed))
        return listed

    def _add_tools(self, connection: McpConnection, listed: list[mcp_types.Tool]) -> None:
        import jsonschema

        from agentforge.tools.mcp_tool import McpTool, tool_key

        for remote in listed:
            key = tool_key(connection.name, remote.name)
            if key in self._tools:
                log.warning("MCP tool %s of %s skipped: %s is taken", remote.name, connection.name, key)
                continue
            try:
                self._tools[key] = McpTool(key, connection, remote)
            except jsonschema.SchemaError as error:
                log.warning(
                    "MCP tool %s of %s skipped: its input schema is invalid (%s)",
                    remote.name,
                    connection.name,
                    error.message,
                )

    def _status_of(self, name: str) -> ServerStatus:
        if name in self._config_errors:
            return {"status": "failed", "error": self._config_errors[name]}
        if name in self._disabled:
            return {"status": "disabled"}
        connection = self._connections.get(name)
        if connection is None:
            return {"status": "failed", "error": "not started"}
        if connection.connected:
            return {"status": "connected"}
        return {"status": "failed", "error": connection.error or "not connected"}


async def _load_sdk(entries: Mapping[str, Any]) -> None:
    """Imports the MCP client (and its SDK) in a thread, once, when there is a server to talk to:
    an import blocks for its whole duration, which the event loop must not."""
    if entries:
        await asyncio.to_thread(importlib.import_module, "agentforge.tools.mcp_tool")
