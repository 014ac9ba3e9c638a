"""The tool-part lifecycle: pending -> running -> completed | error, each transition written once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentforge.bus import Bus
from agentforge.model.events import PART_UPDATED, Event
from agentforge.model.part import FilePart, ToolStateCompleted, ToolStateError, ToolStateRunning
from agentforge.session.events import SessionEvents
from agentforge.session.tool_part import ABORTED_MESSAGE, ToolPartLifecycle


class RecordingSink:
    """The store writer's two intents, recorded: each submitted event resolves at once."""

    def __init__(self) -> None:
        self.submitted: list[Event] = []

    def submit(self, event: Event, *, linger: float = 0.0) -> asyncio.Future[Event]:
        self.submitted.append(event)
        written: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        written.set_result(event)
        return written

    def submit_group(
        self, events: Sequence[Event], *, queue_prompt: str | None = None
    ) -> asyncio.Future[list[Event]]:
        raise AssertionError("a tool part is written alone")

    def publish_after_writes(self, event: Event) -> None:
        raise AssertionError("a tool part's transitions are durable writes")

    def submit_checkpoint(self, tenant_id: str, part: dict[str, Any]) -> asyncio.Future[Any]:
        raise AssertionError("a tool part's transitions are durable writes")

    @property
    def commits_off_loop(self) -> bool:
        return False


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


def lifecycle(sink: RecordingSink) -> ToolPartLifecycle:
    events = SessionEvents(sink, Bus(), "default")
    return ToolPartLifecycle.new(
        events, session_id="ses_1", message_id="msg_1", call_id="call_1", tool="bash"
    )


async def written(write: asyncio.Future[Event] | None) -> Event:
    """The transition's write, which it must have made."""
    assert write is not None, "the transition wrote nothing"
    return await write


def written_states(sink: RecordingSink) -> list[dict[str, Any]]:
    assert all(event.type == PART_UPDATED for event in sink.submitted)
    return [event.properties["part"]["state"] for event in sink.submitted]


async def test_a_call_runs_reports_progress_and_completes(sink: RecordingSink) -> None:
    call = lifecycle(sink)
    assert call.is_pending and not sink.submitted  # new parts are written when the caller says
    await call.write()
    await written(call.start({"command": "ls"}, now=10))
    await written(call.progress("Listing", {"output": "a"}))
    await written(call.progress(None, {"output": "a\nb"}))  # None keeps the title
    attachment = FilePart(id="prt_a", session_id="ses_1", message_id="msg_1", mime="image/png", url="data:,")
    await written(
        call.complete("a\nb", title="Listing", metadata={"exit": 0}, attachments=[attachment], now=20)
    )
    states = written_states(sink)
    assert [state["status"] for state in states] == ["pending", "running", "running", "running", "completed"]
    assert states[3]["title"] == "Listing" and states[3]["metadata"] == {"output": "a\nb"}
    assert states[4]["time"] == {"start": 10, "end": 20}
    assert states[4]["input"] == {"command": "ls"} and states[4]["attachments"][0]["id"] == "prt_a"
    assert call.is_finished


async def test_start_renames_a_repaired_call_and_merges_provider_metadata(sink: RecordingSink) -> None:
    call = lifecycle(sink)
    call.part.metadata = {"kept": 1}
    await written(call.start({}, tool="read", metadata={"signature": "s"}))
    assert call.part.tool == "read"
    assert call.part.metadata == {"kept": 1, "signature": "s"}
    assert call.start({}, tool="write") is None  # a duplicate event for a call under way
    assert call.part.tool == "read" and len(sink.submitted) == 1


async def test_a_failure_keeps_what_the_running_tool_published(sink: RecordingSink) -> None:
    call = lifecycle(sink)
    call.start({"command": "make"}, now=5)
    call.progress("Building", {"output": "half"})
    await written(call.fail("exit 2", {"refusedBy": "rule"}, now=9))
    state = call.part.state
    assert isinstance(state, ToolStateError)
    assert (state.error, state.metadata, state.time.start, state.time.end) == (
        "exit 2",
        {"output": "half", "refusedBy": "rule"},
        5,
        9,
    )


async def test_interrupting_a_call_that_never_ran_starts_and_ends_it_now(sink: RecordingSink) -> None:
    call = lifecycle(sink)
    await written(call.interrupt(now=7))
    state = call.part.state
    assert isinstance(state, ToolStateError)
    assert (state.error, state.metadata, state.time.start, state.time.end) == (
        ABORTED_MESSAGE,
        {"interrupted": True},
        7,
        7,
    )


async def test_a_finished_part_never_changes_again(sink: RecordingSink) -> None:
    call = lifecycle(sink)
    call.start({})
    call.complete("done", title="", metadata={})
    before = call.part.state
    assert isinstance(before, ToolStateCompleted)
    assert call.interrupt() is None
    assert call.fail("late") is None
    assert call.progress("late", {}) is None
    assert call.complete("again", title="", metadata={}) is None
    assert call.part.state is before
    assert len(sink.submitted) == 2


async def test_progress_and_completion_need_a_running_part(sink: RecordingSink) -> None:
    call = lifecycle(sink)
    assert call.progress("early", {}) is None
    assert call.complete("early", title="", metadata={}) is None
    assert not sink.submitted
    call.start({})
    assert isinstance(call.part.state, ToolStateRunning)
