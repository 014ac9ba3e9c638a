"""The audit log through HTTP: a prompt whose tool call waits for approval leaves the expected
entries in order, attributed to who acted, and the chain verifies (with the server's own config entry)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import rfc8785

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import ADMIN, MEMBER
from agentforge.store import Store
from agentforge.store.audit_verify import verify_database
from tests.e2e.harness import EventCollector, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, call, reply
from tests.store.audit_helpers import owner_url


async def test_an_approved_tool_call_is_audited_in_order(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {**fake_provider_config(fake_openai), "permission": {"bash": "ask"}}
    args = {"command": "echo audited", "description": "Say it"}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        events = EventCollector()
        await events.start(live.client)
        try:
            sid = (await live.create_session())["id"]
            live.fake.enqueue(call("bash", args), reply("Done."))
            prompt = asyncio.create_task(live.prompt(sid, "say it"))
            request = await events.wait_for(lambda f: f.type == "permission.asked")
            answer = await live.client.post(
                f"/permission/{request.properties['id']}/reply", json={"reply": "once"}
            )
            assert answer.status_code == 200, answer.text
            assert (await asyncio.wait_for(prompt, 10)).status_code == 200
        finally:
            await events.stop()
        page = (await live.client.get("/audit")).json()

    entries = page["entries"]
    assert [(e["action"], e["actor"]) for e in entries] == [
        ("session.created", "local"),
        ("prompt.accepted", "local"),
        ("tool.requested", "local"),
        ("permission.asked", "local"),
        ("tool.approved", "local"),
        ("tool.executed", "local"),
    ]
    requested, asked, approved, executed = entries[2:]
    assert approved["data"]["requestID"] == asked["data"]["requestID"] == request.properties["id"]
    assert (approved["data"]["reply"], approved["data"]["decidedBy"]) == ("once", "local")
    assert asked["data"]["callID"] == requested["data"]["callID"] == executed["data"]["callID"]
    assert (executed["data"]["tool"], executed["data"]["status"]) == ("bash", "completed")
    assert executed["data"]["argsSha256"] == hashlib.sha256(rfc8785.dumps(args)).hexdigest()
    assert all(e["sessionID"] == sid for e in entries)

    reports = {r.tenant_id: r for r in await asyncio.to_thread(verify_database, owner_url(database_url))}
    assert (reports["default"].ok, reports["default"].length) == (True, 6)
    assert (reports["_system"].ok, reports["_system"].length) == (True, 1)  # config.loaded at start


async def test_config_loaded_is_recorded_once_per_distinct_config(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = fake_provider_config(fake_openai)
    changed = {**config, "retry": {"max_attempts": 3}}
    for effective in (config, config, changed, changed):
        async with start_live_server(tmp_path, fake_openai, effective, database_url=database_url):
            pass

    store = await Store.open(database_url)
    try:
        entries, _ = await store.audit_entries("_system")
    finally:
        await store.close()
    assert [(e.action, e.actor) for e in entries] == [("config.loaded", "system")] * 2
    first, second = (e.data["digest"] for e in entries)
    assert first != second and len(first) == 64
    # A digest, never the values: the provider's API key appears nowhere in the entry.
    assert "sk-test" not in str([e.wire() for e in entries])


async def test_entries_name_the_authenticated_users_and_the_approver(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {
        **fake_provider_config(fake_openai),
        "permission": {"bash": "ask"},
        "auth": {"required": True},
        "tenancy": {"shell": ["acme"]},  # acme's bash call is what gets approved
    }
    args = {"command": "echo audited", "description": "Say it"}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        member = mint_api_key("acme", "dev", frozenset({MEMBER}), "test")
        approver = mint_api_key("acme", "lead", frozenset({ADMIN}), "test")
        for minted in (member, approver):
            await live.runtime.store.create_api_key(minted.stored)
        live.client.headers["Authorization"] = f"Bearer {member.token}"
        events = EventCollector()
        await events.start(live.client)
        try:
            sid = (await live.create_session())["id"]
            live.fake.enqueue(call("bash", args), reply("Done."))
            prompt = asyncio.create_task(live.prompt(sid, "say it"))
            request = await events.wait_for(lambda f: f.type == "permission.asked")
            answer = await live.client.post(
                f"/permission/{request.properties['id']}/reply",
                json={"reply": "once"},
                headers={"Authorization": f"Bearer {approver.token}"},
            )
            assert answer.status_code == 200, answer.text
            assert (await asyncio.wait_for(prompt, 10)).status_code == 200
        finally:
            await events.stop()
        page = await live.client.get("/audit", headers={"Authorization": f"Bearer {approver.token}"})
        forbidden = await live.client.get("/audit")  # the member is no admin
        decided = await live.runtime.store.permission_request("acme", request.properties["id"])

    assert forbidden.status_code == 403
    dev, lead = f"key:{member.stored.key.id}", f"key:{approver.stored.key.id}"
    entries = [(e["action"], e["actor"]) for e in page.json()["entries"]]
    assert entries[2:] == [  # after the two key.created entries
        ("session.created", dev),
        ("prompt.accepted", dev),
        ("tool.requested", dev),
        ("permission.asked", dev),
        ("tool.approved", lead),
        ("tool.executed", dev),
    ]
    assert page.json()["entries"][6]["data"]["decidedBy"] == lead
    assert decided is not None and decided.decided_by == lead


async def test_a_call_refused_by_a_rule_is_audited_as_denied_not_executed(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = {**fake_provider_config(fake_openai), "permission": {"bash": {"*": "allow", "rm *": "deny"}}}
    args = {"command": "rm -rf build", "description": "Clean"}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        sid = (await live.create_session())["id"]
        live.fake.enqueue(call("bash", args), reply("Could not clean."))
        assert (await live.prompt(sid, "clean up")).status_code == 200
        entries = (await live.client.get("/audit")).json()["entries"]

    assert [e["action"] for e in entries] == [
        "session.created",
        "prompt.accepted",
        "tool.requested",
        "tool.denied",
    ]
    denied = entries[3]
    assert (denied["data"]["tool"], denied["data"]["decidedBy"]) == ("bash", "rule")
    assert denied["data"]["argsSha256"] == hashlib.sha256(rfc8785.dumps(args)).hexdigest()
