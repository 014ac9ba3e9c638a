"""The cluster's channel (store/cluster.py) between two links on one Postgres schema."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from agentforge.store import parse_database_url
from agentforge.store.cluster import ClusterLink
from tests.databases import _postgres_schema

pytestmark = pytest.mark.timeout(60)


class _Heard:
    def __init__(self) -> None:
        self.payloads: list[str] = []
        self.changed = asyncio.Event()

    def __call__(self, payload: str) -> None:
        self.payloads.append(payload)
        self.changed.set()

    async def until(self, count: int) -> None:
        while len(self.payloads) < count:
            self.changed.clear()
            await self.changed.wait()


@contextlib.asynccontextmanager
async def _links() -> AsyncIterator[tuple[tuple[ClusterLink, _Heard], tuple[ClusterLink, _Heard]]]:
    async with _postgres_schema(migrated=True) as url:
        target = parse_database_url(url)
        heard_a, heard_b = _Heard(), _Heard()
        a = await ClusterLink.open(target, heard_a)
        try:
            b = await ClusterLink.open(target, heard_b)
            try:
                yield (a, heard_a), (b, heard_b)
            finally:
                await b.close()
        finally:
            await a.close()


async def test_a_link_drops_its_own_notifications_unopened_and_hears_the_others() -> None:
    async with _links() as ((a, heard_a), (b, heard_b)):
        await a.notify(["from a 1", "from a 2"])
        await b.notify(["from b"])
        # One backend's notifications reach listeners in the order they were sent, before those
        # of a transaction committed later: once B's arrived at A, so had A's own.
        await heard_a.until(1)
        await heard_b.until(2)
        assert heard_a.payloads == ["from b"]
        assert heard_b.payloads == ["from a 1", "from a 2"]
        assert a.heard_own == 2
        await a.notify(["from a 3"])
        await heard_b.until(3)  # after B's own, sent before it
        assert heard_b.payloads[-1] == "from a 3"
        assert b.heard_own == 1


async def test_what_a_link_hears_before_its_cipher_is_built_is_opened_in_order() -> None:
    async with _links() as ((a, heard_a), (b, heard_b)):
        assert not a.sealing_loaded and not b.sealing_loaded  # neither spoke nor heard yet
        sent = [f"from b {n}" for n in range(20)]
        for payload in sent:  # one notification each: A hears them while it builds its cipher
            await b.notify([payload])
        await heard_a.until(len(sent))
        assert heard_a.payloads == sent
        assert a.sealing_loaded and b.sealing_loaded
        assert heard_b.payloads == []
