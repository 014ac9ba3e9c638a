"""The composition root: the services a running server holds, wired once at start-up.

What depends on a tenant's config (models, agents, tools, MCP servers, workspace) lives in that
tenant's scope (`await rt.scope(tenant_id)`, runtime/scope.py); the Runtime holds what every tenant
shares. `settings` are the server's own: read tenant-dependent values from the scope's settings.
The session layer gets the shared services as one `SessionServices` (`rt.sessions`, built once
from these fields), never the Runtime itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from agentforge.bus import Bus
from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.config import Settings
from agentforge.config.webhooks import WebhookEndpoint
from agentforge.llm.adapter import stream as provider_stream
from agentforge.llm.pool import ClientLease, acquire_clients, prepare_ssl_context
from agentforge.model.events import DEFAULT_TENANT
from agentforge.permission.service import PermissionService
from agentforge.plugins.loader import create_plugin_manager
from agentforge.plugins.manager import PluginManager
from agentforge.runtime.cluster import FAILOVER_INTERVAL, Cluster
from agentforge.runtime.config_audit import record_config
from agentforge.runtime.hooks import plugin_policy
from agentforge.runtime.recovery import close_interrupted_turns
from agentforge.runtime.sandboxing import command_ledger
from agentforge.runtime.scope import ScopeCache, check_configured_overlays, open_scope
from agentforge.session.channels.questions import QuestionService
from agentforge.session.processor import StreamFn
from agentforge.session.runner import RunnerRegistry
from agentforge.session.scope import TenantScope
from agentforge.session.services import SessionServices
from agentforge.session.status import StatusTracker
from agentforge.store.private import make_private_dir
from agentforge.store.store import Store
from agentforge.telemetry.observer import Telemetry
from agentforge.tools.command_ledger import Reaper
from agentforge.webhooks.dispatcher import WebhookDispatcher

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Runtime:
    settings: Settings
    store: Store
    bus: Bus
    status: StatusTracker
    questions: QuestionService
    permissions: PermissionService
    plugins: PluginManager
    scopes: ScopeCache
    runners: RunnerRegistry = field(default_factory=RunnerRegistry)
    stream: StreamFn = provider_stream
    clock: Clock = SYSTEM_CLOCK
    background: set[asyncio.Task[None]] = field(default_factory=set)
    # Work that lives as long as the runtime (periodic jobs): cancelled on close, never awaited as
    # "background work settling".
    daemons: set[asyncio.Task[None]] = field(default_factory=set)
    clients: ClientLease | None = None  # this runtime's hold on the loop's pooled provider clients
    # Kills what this process's commands leave should the process die outright (command_ledger.py).
    reaper: Reaper | None = None
    webhooks: WebhookDispatcher | None = None  # the tenants' lifecycle notifications
    cluster: Cluster | None = None  # Postgres: this replica's part in the cluster (runtime/cluster.py)
    telemetry: Telemetry = field(default_factory=Telemetry)
    sessions: SessionServices = field(init=False)

    def __post_init__(self) -> None:
        self.sessions = SessionServices(
            store=self.store,
            bus=self.bus,
            status=self.status,
            permissions=self.permissions,
            questions=self.questions,
            plugins=self.plugins,
            runners=self.runners,
            stream=self.stream,
            clock=self.clock,
            spawn=self.spawn,
            scope_of=self.scope,
            observer=self.telemetry,
        )

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        stream: StreamFn = provider_stream,
        clock: Clock = SYSTEM_CLOCK,
        serving: bool = False,
        telemetry: Telemetry | None = None,
    ) -> Runtime:
        """Open the store, build the default tenant's scope, close the turns a previous process left
        running. `stream` makes the model calls and `clock` times back-off and deadlines (a scripted
        model and a fake clock in tests: agentforge.testing). `serving`: for a server, which is alone on
        a SQLite database (SecondServerError otherwise). `telemetry` gets the logs, metrics and spans
        (one of its own unless given)."""
        if telemetry is None:
            telemetry = Telemetry(log_content=settings.config.telemetry.log_content)
        # The data directory holds every tenant's files (and the SQLite database): 0700 when new.
        await asyncio.to_thread(make_private_dir, settings.data_dir)
        bus = Bus()
        # Importing plugin modules runs their code: off the event loop.
        plugins = await asyncio.to_thread(create_plugin_manager, settings)
        bus.listen(plugins.observe_event)
        bus.listen(telemetry.on_event)
        bus.on_lag = telemetry.lagged
        check_configured_overlays(settings)
        store = await Store.open(
            settings.database_url, owner_url=settings.database_owner_url, publish=bus.publish_many
        )
        store.observe(telemetry)
        scopes = ScopeCache(settings, plugins)
        runtime: Runtime | None = None
        try:
            if serving:
                await store.claim_server()
            # The default tenant's scope is built before serving: a broken config or agent file
            # stops start-up, and its MCP servers are up before the first request.
            scopes.add(await open_scope(settings, DEFAULT_TENANT, plugins))
            runtime = cls(
                settings=settings,
                store=store,
                bus=bus,
                status=StatusTracker(bus),
                permissions=PermissionService.from_config(store, settings.config, clock=clock),
                questions=QuestionService.from_config(
                    store.publish_after_writes, settings.config, clock=clock
                ),
                plugins=plugins,
                scopes=scopes,
                stream=stream,
                clock=clock,
                telemetry=telemetry,
            )
            runtime.permissions.policies.append(plugin_policy(plugins))
            # Before serving: a turn the last process left running would otherwise stay open forever.
            closed = await runtime._recover()
            runtime.reaper = await Reaper.start(command_ledger(settings))
            await record_config(store, settings)
        except BaseException:
            if runtime is not None and runtime.cluster is not None:
                await runtime.cluster.close()
            await scopes.close()
            await store.close()
            raise
        if closed:
            log.warning("Closed %d turn(s) left running when the server last stopped", closed)
        else:
            log.info("No turn was left running when the server last stopped")
        runtime.clients = acquire_clients()
        # Ready before the first model call needs it, built beside whatever runs meanwhile.
        runtime.spawn(prepare_ssl_context())
        runtime.start_webhooks()
        telemetry.metrics.watch(
            active_sessions=lambda: runtime.runners.running,
            sse_subscribers=lambda: bus.subscriber_count,
            writer_queue_depth=lambda: store.writer_queue_depth,
            permissions_pending=lambda: runtime.permissions.waiting_count,
        )
        return runtime

    def start_webhooks(self) -> None:
        """Deliver lifecycle notifications to the URLs each tenant configures (webhooks/)."""
        policy = self.settings.config.webhook_delivery
        self.webhooks = WebhookDispatcher(self.store, self.clock, self.webhook_endpoints, policy)
        self.bus.listen(self.webhooks.observe)
        self.spawn_daemon(self.webhooks.run())

    async def webhook_endpoints(self, tenant_id: str) -> list[WebhookEndpoint]:
        try:
            scope = await self.scope(tenant_id)
        except Exception:
            log.exception("no webhooks for tenant %s: its scope cannot be built", tenant_id)
            return []
        return scope.settings.config.webhooks

    async def _recover(self) -> int:
        """Close turns nobody runs any more. Postgres: the replicas share the database, so only the
        turns whose run lease no replica holds, now and every few seconds (failover); SQLite: all
        of them, when this process is the database's owner."""
        if self.store.dialect != "postgresql":
            return await close_interrupted_turns(self.sessions, command_ledger(self.settings))
        # Only dead instances' commands: a live replica sharing the data dir holds its instance lock.
        await asyncio.to_thread(command_ledger(self.settings).kill_leftovers)
        self.cluster = Cluster(self.store, self.bus, self.runners, interval=FAILOVER_INTERVAL)
        await self.cluster.start()
        closed = await self.cluster.recover_orphans(self.sessions)
        self.cluster.start_failover(self.sessions)
        return closed

    async def scope(self, tenant_id: str) -> TenantScope:
        """The tenant's scope, built on its first use (TenantScopeError when it cannot be)."""
        return await self.scopes.get(tenant_id)

    async def close(self) -> None:
        await self.runners.cancel_all()
        if self.cluster is not None:
            await self.cluster.close()
        tasks = [*self.background, *self.daemons]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.scopes.close()
        if self.reaper is not None:
            await self.reaper.stop()
        # Nothing of ours streams any more. The pooled provider clients are shared by every runtime on
        # the loop: the last runtime to let go closes them.
        if self.clients is not None:
            await self.clients.release()
        await self.store.close()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Keep a reference to background work so it is not garbage-collected mid-flight."""
        task = asyncio.create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def spawn_daemon(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a job for the runtime's whole life (cancelled by close)."""
        task = asyncio.create_task(coro)
        self.daemons.add(task)
        task.add_done_callback(self.daemons.discard)
