"""A plugin (config `plugin: ["tests.e2e.held_prompts"]`) that holds a chosen session's prompts in
`chat_message`, the last step before the user message is written, so a test can act in between."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentforge.model.part import ModelRef
from agentforge.plugins import ChatMessage, hookimpl


@dataclass
class Hold:
    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: int = 0
    _arrival: asyncio.Event = field(default_factory=asyncio.Event)

    async def reached(self, count: int = 1) -> None:
        """Wait until `count` prompts are held."""
        while self.arrived < count:
            self._arrival.clear()
            await self._arrival.wait()

    def arrive(self) -> None:
        self.arrived += 1
        self._arrival.set()


HOLDS: dict[str, Hold] = {}


def hold(session_id: str) -> Hold:
    """Hold the next prompts of `session_id` until the returned hold is released."""
    HOLDS[session_id] = Hold()
    return HOLDS[session_id]


@hookimpl
async def chat_message(session_id: str, agent: str, model: ModelRef, output: ChatMessage) -> None:
    held = HOLDS.get(session_id)
    if held is not None:
        held.arrive()
        await held.release.wait()
