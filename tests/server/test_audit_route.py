"""`GET /audit`: the caller's tenant chain, oldest first, paginated; bad parameters are 400s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from agentforge.store import Store
from tests.e2e.harness import LiveServer


@pytest.fixture
async def beside(live: LiveServer) -> AsyncIterator[Store]:
    """A second store on the live server's database (another writer, as a second replica would be)."""
    store = await Store.open(live.settings.database_url)
    try:
        yield store
    finally:
        await store.close()


def _json(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def test_lists_the_callers_chain_with_its_hashes(live: LiveServer, beside: Store) -> None:
    session = await live.create_session()
    _json(await live.prompt(session["id"], "hello", noReply=True))
    await beside.record_audit("acme", "key.created", actor="root", data={"keyID": "key_1"})

    page = _json(await live.client.get("/audit"))
    assert page["next"] is None
    entries = page["entries"]
    # Only the caller's tenant: neither acme's entry nor the server's own `_system` chain.
    assert [(e["action"], e["actor"], e["tenant"]) for e in entries] == [
        ("session.created", "local", "default"),
        ("prompt.accepted", "local", "default"),
    ]
    assert [e["seq"] for e in entries] == [1, 2]
    assert all(e["sessionID"] == session["id"] for e in entries)
    assert entries[0]["prevHash"] == "0" * 64
    assert entries[1]["prevHash"] == entries[0]["rowHash"]
    assert entries[0]["data"]["title"] == session["title"]


async def test_pages_follow_next(live: LiveServer, beside: Store) -> None:
    for index in range(5):
        await beside.record_audit("default", "test", actor="alice", data={"i": index})
    seen: list[int] = []
    after: int | None = 0
    pages = 0
    while after is not None:
        page = _json(await live.client.get("/audit", params={"after": after, "limit": 2}))
        seen += [e["data"]["i"] for e in page["entries"]]
        after = page["next"]
        pages += 1
    assert (seen, pages) == ([0, 1, 2, 3, 4], 3)
    tail = _json(await live.client.get("/audit", params={"after": 3}))
    assert [e["seq"] for e in tail["entries"]] == [4, 5] and tail["next"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"after": -1}, "after"),
        ({"after": "abc"}, "after"),
    ],
)
async def test_bad_parameters_are_400(live: LiveServer, params: dict[str, Any], field: str) -> None:
    body = _json(await live.client.get("/audit", params=params), 400)
    assert field in body["data"]["message"]
