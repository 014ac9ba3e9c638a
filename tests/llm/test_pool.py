"""Provider SDK clients pooled per event loop: shared by the leases on a loop, closed by the last one."""

from __future__ import annotations

import asyncio
import ssl
from types import SimpleNamespace

import pytest

from agentforge.llm import anthropic_messages, openai_chat
from agentforge.llm.pool import acquire_clients, close_all_clients, pooled_clients, shared_ssl_context
from tests.fakes.openai_server import FakeOpenAI
from tests.llm.streaming import model_for


async def test_clients_stay_open_until_the_loops_last_lease_is_released(fake_openai: FakeOpenAI) -> None:
    first, second = acquire_clients(), acquire_clients()
    client = openai_chat.client_for(model_for(fake_openai))
    assert openai_chat.client_for(model_for(fake_openai)) is client, "one client per endpoint"

    await first.release()
    await first.release()  # a second release of the same lease changes nothing
    assert not client.is_closed() and pooled_clients() == [client]

    await second.release()
    assert client.is_closed() and pooled_clients() == []
    fresh = openai_chat.client_for(model_for(fake_openai))
    assert fresh is not client and not fresh.is_closed()


async def test_closing_takes_every_adapters_clients_of_the_running_loop(fake_openai: FakeOpenAI) -> None:
    chat = openai_chat.client_for(model_for(fake_openai))
    anthropic = anthropic_messages.client_for(model_for(fake_openai, api="anthropic"))
    assert set(map(id, pooled_clients())) == {id(chat), id(anthropic)}
    await close_all_clients()
    assert chat.is_closed() and anthropic.is_closed() and pooled_clients() == []


def test_each_loop_has_its_own_clients() -> None:
    """A pooled connection belongs to the loop that opened it."""
    endpoint = SimpleNamespace(base_url="http://127.0.0.1:9/v1")  # only its address is read

    async def create_then_close() -> openai_chat.ChatClient:
        client = openai_chat.client_for(model_for(endpoint))  # type: ignore[arg-type]
        await close_all_clients()
        return client

    first, second = asyncio.run(create_then_close()), asyncio.run(create_then_close())
    assert first is not second and first.is_closed() and second.is_closed()


async def test_a_lease_is_released_on_its_own_loop() -> None:
    lease = acquire_clients()
    with pytest.raises(RuntimeError, match="event loop that acquired it"):
        await asyncio.to_thread(asyncio.run, lease.release())
    await lease.release()


async def test_pools_share_one_verifying_ssl_context(fake_openai: FakeOpenAI) -> None:
    """Built once per process, not once per client (nor skipped for an http:// endpoint: a redirect
    may still lead to https)."""
    first = openai_chat.client_for(model_for(fake_openai))
    second = openai_chat.client_for(model_for(fake_openai, api_key="sk-other"))
    assert first is not second
    contexts = {id(client.http._transport._pool._ssl_context) for client in (first, second)}  # type: ignore[attr-defined]
    assert contexts == {id(shared_ssl_context())}
    assert shared_ssl_context().verify_mode is ssl.CERT_REQUIRED and shared_ssl_context().check_hostname
