"""The first delta of a reply the provider sends in one read goes out once its part has committed,
not behind the rest of the read (session/processor.py `_first_write_committed`). Through HTTP
against the wire-level OpenAI fake, whose short replies arrive in one read."""

from __future__ import annotations

import pytest

from agentforge.model.events import Event
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import Script


async def test_a_reply_read_at_once_publishes_its_first_delta_before_the_rest_is_written(
    live: LiveServer,
) -> None:
    store = live.runtime.store
    if not store.commits_off_loop:
        pytest.skip("Postgres' writer is a task on the loop: it takes the read's writes together")
    batches: list[tuple[str, int]] = []  # each event, with the commits done when it was published

    def published(event: Event) -> None:
        batches.append((event.type, store.committed_batches))

    live.runtime.bus.listen(published)
    live.fake.enqueue(Script().text("A short reply, all of it in one read.", chunk_size=4))
    session = await live.create_session()

    response = await live.prompt(session["id"], "hi")

    assert response.status_code == 200
    first_delta = next(count for kind, count in batches if kind == "message.part.delta")
    last = batches[-1][1]
    # The step's first parts committed, then (at least) one more commit with the rest of the read.
    assert first_delta < last
    assert [kind for kind, _ in batches].count("message.part.delta") == 10
