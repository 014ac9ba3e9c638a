"""What the session layer uses of the running server: the services every tenant shares.

The composition root (runtime/runtime.py `Runtime`) builds them once and hands them down; session
components take this object (and the caller's tenant scope) instead of the whole runtime, so the
session package never imports the runtime and a test can wire a session with a scripted model
(`agentforge.testing`) and a fake clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from agentforge.bus import Bus
from agentforge.clock import Clock
from agentforge.permission.service import PermissionService
from agentforge.plugins.manager import PluginManager
from agentforge.session.channels.questions import QuestionService
from agentforge.session.events import SessionEvents
from agentforge.session.observer import NULL_OBSERVER, SessionObserver
from agentforge.session.processor import StreamFn
from agentforge.session.runner import RunnerRegistry
from agentforge.session.scope import TenantScope
from agentforge.session.status import StatusTracker
from agentforge.store.store import Store

# Background work the server keeps a reference to (and cancels on shutdown).
Spawn = Callable[[Coroutine[Any, Any, None]], None]
# A tenant's scope, built on first use (TenantScopeError when it cannot be).
ScopeOf = Callable[[str], Awaitable[TenantScope]]


@dataclass(frozen=True, slots=True)
class SessionServices:
    store: Store
    bus: Bus
    status: StatusTracker
    permissions: PermissionService
    questions: QuestionService
    plugins: PluginManager
    runners: RunnerRegistry
    stream: StreamFn  # one model call: the providers, or a scripted model in tests
    clock: Clock  # what back-off and deadlines read and sleep on
    spawn: Spawn
    scope_of: ScopeOf
    observer: SessionObserver = NULL_OBSERVER  # logs, metrics and traces of turns (telemetry/)

    def events(self, tenant_id: str) -> SessionEvents:
        return SessionEvents(self.store, self.bus, tenant_id)

    async def scope(self, tenant_id: str) -> TenantScope:
        return await self.scope_of(tenant_id)
