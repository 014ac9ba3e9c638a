"""API key rows: create, find, list and revoke, always within one tenant."""

from __future__ import annotations

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import ADMIN, MEMBER
from agentforge.store import Store


async def test_a_created_key_is_found_with_its_hash_and_roles(store: Store) -> None:
    minted = mint_api_key("acme", "ci", frozenset({ADMIN, MEMBER}), "test")
    created = await store.create_api_key(minted.stored)
    assert created == minted.stored.key
    assert await store.find_api_key("acme", created.id) == minted.stored


async def test_lookups_are_scoped_to_the_tenant(store: Store) -> None:
    minted = mint_api_key("acme", "ci", frozenset({MEMBER}), "test")
    await store.create_api_key(minted.stored)
    assert await store.find_api_key("globex", minted.stored.key.id) is None
    assert await store.list_api_keys("globex") == []
    assert await store.revoke_api_key("globex", minted.stored.key.id) is None
    assert (await store.find_api_key("acme", minted.stored.key.id)) == minted.stored


async def test_list_is_oldest_first_and_includes_revoked_keys(store: Store) -> None:
    first = mint_api_key("acme", "first", frozenset({MEMBER}), "test")
    second = mint_api_key("acme", "second", frozenset({MEMBER}), "test")
    await store.create_api_key(first.stored)
    await store.create_api_key(second.stored)
    await store.revoke_api_key("acme", first.stored.key.id)
    listed = await store.list_api_keys("acme")
    assert [key.name for key in listed] == ["first", "second"]
    assert [key.revoked for key in listed] == [True, False]


async def test_revoking_keeps_the_first_revocation_time(store: Store) -> None:
    minted = mint_api_key("acme", "ci", frozenset({MEMBER}), "test")
    await store.create_api_key(minted.stored)
    revoked = await store.revoke_api_key("acme", minted.stored.key.id)
    assert revoked is not None and revoked.time_revoked is not None
    again = await store.revoke_api_key("acme", minted.stored.key.id)
    assert again is not None and again.time_revoked == revoked.time_revoked
    found = await store.find_api_key("acme", minted.stored.key.id)
    assert found is not None and found.key.revoked
