"""The services a running server holds, wired once at start-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from agentforge.agents.registry import AgentRegistry
from agentforge.bus import Bus
from agentforge.config import Settings
from agentforge.llm.adapter import stream as provider_stream
from agentforge.llm.provider import ProviderCatalog
from agentforge.permission.service import PermissionService
from agentforge.session.events import SessionEvents
from agentforge.session.processor import StreamFn
from agentforge.session.questions import QuestionService
from agentforge.session.recovery import close_interrupted_turns
from agentforge.session.runner import RunnerRegistry
from agentforge.session.status import StatusTracker
from agentforge.store.store import Store
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
    runners: RunnerRegistry = field(default_factory=RunnerRegistry)
    stream: StreamFn = provider_stream
    background: set[asyncio.Task[None]] = field(default_factory=set)

    @classmethod
    async def open(cls, settings: Settings) -> Runtime:
        bus = Bus()
        store = await Store.open(settings.database_url, publish=bus.publish_many)
        try:
            runtime = cls(
                settings=settings,
                store=store,
                bus=bus,
                status=StatusTracker(bus),
                catalog=ProviderCatalog(settings.config),
                tools=ToolRegistry.builtin(),
                agents=AgentRegistry(settings.config, data_dir=settings.data_dir),
                permissions=PermissionService.from_config(store, settings.config),
                questions=QuestionService(store.publish_after_writes),
            )
            # Before serving: a turn the last process left running would otherwise stay open forever.
            closed = await close_interrupted_turns(runtime)
        except BaseException:
            await store.close()
            raise
        if closed:
            log.warning("Closed %d turn(s) left running when the server last stopped", closed)
        else:
            log.info("No turn was left running when the server last stopped")
        return runtime

    async def close(self) -> None:
        await self.runners.cancel_all()
        for task in list(self.background):
            task.cancel()
        if self.background:
            await asyncio.gather(*self.background, return_exceptions=True)
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
