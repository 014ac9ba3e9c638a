"""Refused requests and key changes land in the audit log, without the credentials."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2

from agentforge.identity.failures import FailureThrottle
from agentforge.identity.model import ADMIN, SYSTEM_TENANT
from agentforge.store import Store
from agentforge.store.audit import AUTH_FAILED, KEY_CREATED, KEY_REVOKED, AuditRecord
from tests.fakes.openai_server import FakeOpenAI
from tests.server.test_auth import REQUIRED, serve


class Clock:
    """Drives both the throttle's window and the wall time replicas share it by (Postgres)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def _chain(store: Store, tenant: str) -> list[AuditRecord]:
    entries, _next = await store.audit_entries(tenant, limit=1000)
    return entries


async def test_a_refused_key_is_audited_in_its_claimed_tenant_without_the_secret(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED, database_url) as forge:
        minted = await forge.new_key("acme")
        prefix, tenant, key_id, secret = minted.token.split(".")
        forged = f"{prefix}.{tenant}.{key_id}.{secret[::-1]}"
        answer = await forge.client.get("/session?x=1", headers={"Authorization": f"Bearer {forged}"})
        assert answer.status_code == 401
        entries = await _chain(forge.store, "acme")
    assert [e.action for e in entries] == [KEY_CREATED, AUTH_FAILED]
    failure = entries[1]
    assert failure.actor == "anonymous"
    assert failure.data["status"] == 401
    assert failure.data["request"] == "GET /session"
    assert failure.data["reason"] == "invalid or revoked API key"
    assert secret not in str(failure.wire()) and secret[::-1] not in str(failure.wire())


async def test_a_request_without_credentials_is_audited_in_the_system_chain(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        assert (await forge.client.get("/session")).status_code == 401
        entries = await _chain(forge.store, SYSTEM_TENANT)
    refused = [e for e in entries if e.action == AUTH_FAILED]
    assert len(refused) == 1
    assert refused[0].data["method"] is None
    assert refused[0].data["request"] == "GET /session"


async def test_key_creation_and_revocation_are_audited_with_the_change(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED, database_url) as forge:
        minted = await forge.new_key("acme")
        await forge.store.revoke_api_key("acme", minted.stored.key.id, actor="ops@example.com")
        entries = await _chain(forge.store, "acme")
    assert [(e.action, e.actor) for e in entries] == [(KEY_CREATED, "test"), (KEY_REVOKED, "ops@example.com")]
    assert all(e.data["keyID"] == minted.stored.key.id for e in entries)
    assert minted.token.split(".")[3] not in str([e.wire() for e in entries])
    assert minted.stored.secret_hash not in str([e.wire() for e in entries])


async def test_repeated_refusals_are_one_row_until_the_window_passes(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    clock = Clock()
    throttle = FailureThrottle(clock=clock, wall=clock)
    async with serve(tmp_path, fake_openai, REQUIRED, database_url, failure_throttle=throttle) as forge:
        minted = await forge.new_key("acme")
        prefix, tenant, key_id, secret = minted.token.split(".")
        forged = {"Authorization": f"Bearer {prefix}.{tenant}.{key_id}.{secret[::-1]}"}
        for _ in range(50):
            assert (await forge.client.get("/session", headers=forged)).status_code == 401
        refused = [e for e in await _chain(forge.store, "acme") if e.action == AUTH_FAILED]
        assert [e.data["suppressed"] for e in refused] == [0]
        assert len(forge.failures) == 50  # the failure hook still hears of every one
        clock.now += 60
        assert (await forge.client.get("/session", headers=forged)).status_code == 401
        refused = [e for e in await _chain(forge.store, "acme") if e.action == AUTH_FAILED]
    assert [e.data["suppressed"] for e in refused] == [0, 49]
    assert "overflow" not in refused[1].data


async def test_other_reasons_and_peers_get_their_own_rows(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    throttle = FailureThrottle(clock=Clock())
    async with serve(tmp_path, fake_openai, REQUIRED, failure_throttle=throttle) as forge:
        member = await forge.new_key("acme")
        prefix, tenant, key_id, secret = member.token.split(".")
        bad = {"Authorization": f"Bearer {prefix}.{tenant}.{key_id}.{secret[::-1]}"}
        other_peer = httpx2.AsyncHTTPTransport(local_address="127.0.0.2")
        async with httpx2.AsyncClient(base_url=forge.client.base_url, transport=other_peer) as second:
            for client in (forge.client, forge.client, second, second):
                assert (await client.get("/session", headers=bad)).status_code == 401
                assert (await client.get("/session")).status_code == 401
                member_auth = {"Authorization": f"Bearer {member.token}"}
                assert (await client.get("/_test/admin", headers=member_auth)).status_code == 403
        acme = [e for e in await _chain(forge.store, "acme") if e.action == AUTH_FAILED]
        system = [e for e in await _chain(forge.store, SYSTEM_TENANT) if e.action == AUTH_FAILED]
    assert sorted((e.data["peer"], e.data["reason"]) for e in acme) == [
        ("127.0.0.1", "invalid or revoked API key"),
        ("127.0.0.1", f"this endpoint needs the {ADMIN} role"),
        ("127.0.0.2", "invalid or revoked API key"),
        ("127.0.0.2", f"this endpoint needs the {ADMIN} role"),
    ]
    assert sorted(e.data["peer"] for e in system) == ["127.0.0.1", "127.0.0.2"]
    assert all(e.data["suppressed"] == 0 for e in acme + system)
