"""The services a running server holds, wired once at start-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from agentforge.agents.registry import AgentRegistry, load_agents
from agentforge.bus import Bus
from agentforge.config import Settings
from agentforge.llm.adapter import stream as provider_stream
from agentforge.llm.provider import ProviderCatalog
from agentforge.permission.service import PermissionService
from agentforge.plugins.loader import create_plugin_manager
from agentforge.plugins.manager import PluginManager
from agentforge.session.events import SessionEvents
from agentforge.session.hooks import plugin_policy
from agentforge.session.processor import StreamFn
from agentforge.session.questions import QuestionService
from agentforge.session.recovery import close_interrupted_turns
from agentforge.session.runner import RunnerRegistry
from agentforge.session.status import StatusTracker
from agentforge.store.store import Store
from agentforge.tools.mcp import McpManager
from agentforge.tools.registry import ToolRegistry
from agentforge.tools.truncation import TruncationLimits

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Runtime:
    settings: Settings
    store: Store
    bus: Bus
    status: StatusTracker
    catalog: ProviderCatalog
    tools: ToolRegistry
    agents: AgentRegistry
    questions: QuestionService
    permissions: PermissionService
    plugins: PluginManager
    mcp: McpManager | None = None
    runners: RunnerRegistry = field(default_factory=RunnerRegistry)
    stream: StreamFn = provider_stream
    background: set[asyncio.Task[None]] = field(default_factory=set)

    @classmethod
    async def open(cls, settings: Settings) -> Runtime:
        bus = Bus()
        # Importing plugin modules runs their code: off the event loop.
        plugins = await asyncio.to_thread(create_plugin_manager, settings)
        bus.listen(plugins.observe_event)
        store = await Store.open(
            settings.database_url, owner_url=settings.database_owner_url, publish=bus.publish_many
        )
        try:
            runtime = cls(
                settings=settings,
                store=store,
                bus=bus,
                status=StatusTracker(bus),
                catalog=ProviderCatalog(settings.config),
                tools=ToolRegistry.from_plugins(plugins),
                agents=await asyncio.to_thread(load_agents, settings),  # reads agent files
                permissions=PermissionService.from_config(store, settings.config),
                questions=QuestionService(store.publish_after_writes),
                plugins=plugins,
            )
            runtime.permissions.policies.append(plugin_policy(plugins))
            await runtime._start_mcp()
            # Before serving: a turn the last process left running would otherwise stay open forever.
            closed = await close_interrupted_turns(runtime)
        except BaseException:
            if "runtime" in locals() and runtime.mcp is not None:
                await runtime.mcp.close()
            await store.close()
            raise
        if closed:
            log.warning("Closed %d turn(s) left running when the server last stopped", closed)
        else:
            log.info("No turn was left running when the server last stopped")
        return runtime

    async def _start_mcp(self) -> None:
        """Connect the config's MCP servers; their tools join the registry as `<server>_<tool>`.
        A server that is down is reported in its status and by its tools, never fatal."""
        servers = (self.settings.config.model_extra or {}).get("mcp")
        if not servers:
            return
        self.mcp = McpManager(servers, directory=self.settings.directory)
        await self.mcp.start()
        for name, status in self.mcp.status().items():
            if status["status"] == "failed":
                log.warning("MCP server %s failed to start: %s", name, status.get("error"))
        for tool in self.mcp.tools():
            if self.tools.get(tool.id) is None:  # never let a server shadow a built-in
                self.tools.register(tool)

    async def close(self) -> None:
        await self.runners.cancel_all()
        for task in list(self.background):
            task.cancel()
        if self.background:
            await asyncio.gather(*self.background, return_exceptions=True)
        if self.mcp is not None:
            await self.mcp.close()
        # Provider SDK clients are pooled per event loop and shared by every runtime on it, so they
        # are not closed here: another runtime (tests, the CLI beside a server) may be streaming.
        await self.store.close()

    def events(self, tenant_id: str) -> SessionEvents:
        return SessionEvents(self.store, self.bus, tenant_id)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Keep a reference to background work so it is not garbage-collected mid-flight."""
        task = asyncio.create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    @property
    def limits(self) -> TruncationLimits:
        output = self.settings.config.tool_output
        return TruncationLimits(max_lines=output.max_lines, max_bytes=output.max_bytes)

    @property
    def max_retries(self) -> int:
        return self.settings.config.retry.max_attempts
