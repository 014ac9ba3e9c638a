"""The processor's pace against the writer (session/processor.py): with the writer on a thread of
its own (SQLite) a new streaming part commits before the stream is read on, with the writer on the
event loop (Postgres) it does not wait; the first delta reaches subscribers before the rest of the
reply is processed. In-process, with a scripted model that notes what had happened each time the
processor asked it for its next event."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from agentforge.llm import events as ev
from agentforge.llm.messages import ModelRequest
from agentforge.llm.provider import ResolvedModel
from agentforge.model.events import Event
from agentforge.session.inputs import PromptInput, SessionCreateInput
from agentforge.session.prompt import SessionPrompt
from agentforge.session.service import SessionService
from agentforge.testing import ScriptedModel, scripted_runtime
from agentforge.testing.model import Turn
from tests.databases import owner_url_for


@dataclass(frozen=True)
class Asked:
    """What had happened when the processor asked for the event after `after`."""

    after: ev.StreamEvent
    published: tuple[Event, ...]  # so far
    received_delta: bool  # whether a subscriber had taken a delta


@dataclass
class WatchedModel(ScriptedModel):
    published: list[Event] = field(default_factory=list)
    received: list[Event] = field(default_factory=list)
    asked: list[Asked] = field(default_factory=list)

    def __call__(self, model: ResolvedModel, request: ModelRequest) -> AsyncIterator[ev.StreamEvent]:
        return self._watched(super().__call__(model, request))

    async def _watched(self, stream: AsyncIterator[ev.StreamEvent]) -> AsyncIterator[ev.StreamEvent]:
        async for event in stream:
            yield event
            received = any(e.type == "message.part.delta" for e in self.received)
            self.asked.append(Asked(event, tuple(self.published), received))


async def _run_turn(tmp_path: Path, model: WatchedModel, database_url: str | None = None) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    owner = None if database_url is None else owner_url_for(database_url)
    async with scripted_runtime(
        workspace, tmp_path / "data", model, database_url=database_url, database_owner_url=owner
    ) as rt:
        rt.bus.listen(model.published.append)
        subscription = rt.bus.subscribe()

        async def receive() -> None:
            async for event in subscription:
                model.received.append(event)

        receiver = asyncio.create_task(receive())
        try:
            sessions = SessionService(rt.sessions, "default")
            session = await sessions.create(SessionCreateInput.model_validate({}))
            body = PromptInput.model_validate({"parts": [{"type": "text", "text": "hi"}]})
            await SessionPrompt(sessions).prompt(session.id, body)
        finally:
            receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiver


def _after(model: WatchedModel, kind: type[ev.StreamEvent]) -> Asked:
    return next(asked for asked in model.asked if isinstance(asked.after, kind))


def _reply_parts(published: tuple[Event, ...]) -> list[str]:
    """The types of the assistant's parts among `published`."""
    replies = {
        e.properties["info"]["id"]
        for e in published
        if e.type == "message.updated" and e.properties["info"]["role"] == "assistant"
    }
    return [
        e.properties["part"]["type"]
        for e in published
        if e.type == "message.part.updated" and e.properties["part"]["messageID"] in replies
    ]


def _deltas(published: tuple[Event, ...]) -> int:
    return sum(e.type == "message.part.delta" for e in published)


def _off_loop(database_url: str) -> bool:
    return database_url.startswith("sqlite")


async def test_a_new_text_part_commits_before_the_stream_is_read_on_only_off_the_loop(
    tmp_path: Path, database_url: str
) -> None:
    model = WatchedModel()
    model.respond(Turn().text("a reply that arrives at once", chunk_size=4))
    await _run_turn(tmp_path, model, database_url)
    # Published only once committed: the part (and the step's start with it) is durable by then.
    published = _after(model, ev.TextStart).published
    committed = ["step-start", "text"] if _off_loop(database_url) else []
    assert _reply_parts(published) == committed
    assert _deltas(published) == 0


async def test_a_new_reasoning_part_commits_before_the_stream_is_read_on_only_off_the_loop(
    tmp_path: Path, database_url: str
) -> None:
    model = WatchedModel()
    model.respond(Turn().reasoning("thinking it over").text("done"))
    await _run_turn(tmp_path, model, database_url)
    committed = ["step-start", "reasoning"] if _off_loop(database_url) else []
    assert _reply_parts(_after(model, ev.ReasoningStart).published) == committed


async def test_the_first_delta_reaches_subscribers_before_the_next_event_is_read(tmp_path: Path) -> None:
    """SQLite: the part has committed when its first delta comes (see above)."""
    model = WatchedModel()
    model.respond(Turn().text("a reply that arrives at once", chunk_size=4))
    await _run_turn(tmp_path, model)
    first = _after(model, ev.TextDelta)
    assert _deltas(first.published) == 1
    assert first.received_delta
