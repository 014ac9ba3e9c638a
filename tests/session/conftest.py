"""A session layer wired in-process: the real runtime on SQLite, a scripted model, a fake clock.

No HTTP and no provider: these tests drive `SessionPrompt` directly and run in milliseconds; the
end-to-end tests (tests/e2e) cover the same paths through the server and the wire-level fakes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_asyncio

from agentforge.model.events import Event
from agentforge.model.message import WithParts
from agentforge.model.part import Part, ToolPart
from agentforge.model.session import Session
from agentforge.runtime.runtime import Runtime
from agentforge.session.inputs import PromptInput, SessionCreateInput
from agentforge.session.prompt import SessionPrompt
from agentforge.session.service import SessionService
from agentforge.testing import FakeClock, ScriptedModel, scripted_runtime


@dataclass
class Forge:
    rt: Runtime
    model: ScriptedModel
    clock: FakeClock
    workspace: Path
    published: list[Event] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def observe(self, event: Event) -> None:
        self.published.append(event)
        self._changed.set()

    async def until(self, predicate: Callable[[], bool], *, timeout: float = 5.0) -> None:
        """Wait until `predicate` holds, checking it after each event the server publishes."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    @property
    def sessions(self) -> SessionService:
        return SessionService(self.rt.sessions, "default")

    @property
    def prompts(self) -> SessionPrompt:
        return SessionPrompt(self.sessions)

    async def session(self, **body: Any) -> Session:
        return await self.sessions.create(SessionCreateInput.model_validate(body))

    async def prompt(self, session_id: str, text: str, **body: Any) -> WithParts:
        request = PromptInput.model_validate({"parts": [{"type": "text", "text": text}], **body})
        return await self.prompts.prompt(session_id, request)

    async def history(self, session_id: str) -> list[WithParts]:
        return await self.rt.store.history("default", session_id)

    async def tool_parts(self, session_id: str) -> list[ToolPart]:
        return [
            part
            for item in await self.history(session_id)
            for part in item.parts
            if isinstance(part, ToolPart)
        ]

    def events_of(self, kind: str) -> list[Event]:
        return [event for event in self.published if event.type == kind]


MakeForge = Callable[..., AbstractAsyncContextManager[Forge]]


@pytest_asyncio.fixture
async def make_forge(tmp_path: Path) -> AsyncIterator[MakeForge]:
    """Open a forge with the given clock and config overrides. The default clock stands still: a
    test that waits on it (a back-off, a deadline) advances it, or passes `FakeClock(autojump=True)`."""

    @contextlib.asynccontextmanager
    async def make(clock: FakeClock | None = None, **config: Any) -> AsyncIterator[Forge]:
        workspace = tmp_path / "workspace"
        workspace.mkdir(exist_ok=True)
        model = ScriptedModel()
        clock = clock or FakeClock()
        async with scripted_runtime(workspace, tmp_path / "data", model, clock=clock, **config) as rt:
            forge = Forge(rt, model, clock, workspace)
            rt.bus.listen(forge.observe)
            yield forge

    yield make


@pytest_asyncio.fixture
async def forge(make_forge: MakeForge) -> AsyncIterator[Forge]:
    async with make_forge() as opened:
        yield opened


def texts(parts: list[Part]) -> list[str]:
    return [
        getattr(part, "text", "")
        for part in parts
        if part.type == "text" and not getattr(part, "synthetic", False)
    ]
