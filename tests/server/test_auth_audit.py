"""Refused requests and key changes land in the audit log, without the credentials."""

from __future__ import annotations

from pathlib import Path

from agentforge.identity.model import SYSTEM_TENANT
from agentforge.store import Store
from agentforge.store.audit import AUTH_FAILED, KEY_CREATED, KEY_REVOKED, AuditRecord
from tests.fakes.openai_server import FakeOpenAI
from tests.server.test_auth import REQUIRED, serve


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
