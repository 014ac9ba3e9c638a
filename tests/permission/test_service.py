"""The ask/reply service over a real store: rules first, then waiting requests answered by a reply,
a policy, the deadline or an abort; every decision stored with who made it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from agentforge.config import Config, ConfigError
from agentforge.model import events as ev
from agentforge.model.events import Event
from agentforge.model.permission import PermissionRequestInfo
from agentforge.permission.errors import CorrectedError, DeniedError, ExpiredError, RejectedError
from agentforge.permission.rules import RuleSource, from_config
from agentforge.permission.service import (
    PermissionService,
    PolicyDecision,
    PolicyHook,
    UnknownPermissionRequestError,
)
from agentforge.store import Store
from agentforge.tools.base import PermissionRequest
from tests.store.builders import new_session, session_created

TENANT = "default"
ASK_BASH = from_config({"*": "allow", "bash": {"*": "ask", "rm *": "deny"}})


@dataclass
class Published:
    events: list[Event] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def extend(self, batch: list[Event]) -> None:
        self.events.extend(batch)
        self.changed.set()

    def of_type(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.type == kind]

    async def wait_for(self, kind: str, count: int = 1) -> list[Event]:
        async with asyncio.timeout(5):
            while len(self.of_type(kind)) < count:
                self.changed.clear()
                await self.changed.wait()
        return self.of_type(kind)


@pytest.fixture
def published() -> Published:
    return Published()


@pytest.fixture
async def store(database_url: str, published: Published) -> AsyncIterator[Store]:
    opened = await Store.open(database_url, publish=published.extend)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def session_id(store: Store) -> str:
    session = new_session()
    await store.write(session_created(session))
    return session.id


def bash(command: str, always: str | None = None) -> PermissionRequest:
    return PermissionRequest(
        permission="bash", patterns=[command], always=[always or f"{command.split()[0]} *"], metadata={"n": 1}
    )


def asking(
    service: PermissionService, session_id: str, request: PermissionRequest, rules: RuleSource = ASK_BASH
) -> asyncio.Task[None]:
    return asyncio.create_task(
        service.ask(
            TENANT, session_id, request, rules, message_id="msg_1", call_id=f"call_{request.patterns[0]}"
        )
    )


async def stored(store: Store, request_id: str) -> PermissionRequestInfo:
    found = await store.permission_request(TENANT, request_id)
    assert found is not None
    return found


async def test_allowed_and_denied_by_rule_need_nobody(
    store: Store, session_id: str, published: Published
) -> None:
    service = PermissionService(store)
    await service.ask(TENANT, session_id, PermissionRequest("read", ["a.txt"]), ASK_BASH)
    with pytest.raises(DeniedError, match="rm \\*") as denied:
        await service.ask(TENANT, session_id, bash("rm -rf build"), ASK_BASH)
    assert denied.value.blocks_loop is False  # the model may try another way
    assert service.pending(TENANT) == []
    assert not published.of_type(ev.PERMISSION_ASKED)


async def test_any_denied_pattern_denies_the_whole_request(store: Store, session_id: str) -> None:
    service = PermissionService(store)
    request = PermissionRequest("bash", ["ls", "rm x"], always=["ls *", "rm *"])
    with pytest.raises(DeniedError):
        await service.ask(TENANT, session_id, request, ASK_BASH)


async def test_ask_waits_for_once(store: Store, session_id: str, published: Published) -> None:
    service = PermissionService(store)
    task = asking(service, session_id, bash("ls -la"))
    [asked] = await published.wait_for(ev.PERMISSION_ASKED)

    props = asked.properties
    assert props["sessionID"] == session_id and props["permission"] == "bash"
    assert props["patterns"] == ["ls -la"] and props["always"] == ["ls *"]
    assert props["tool"] == {"messageID": "msg_1", "callID": "call_ls -la"}
    assert props["metadata"] == {"n": 1}
    assert asked.seq is not None
    assert [p.id for p in service.pending(TENANT)] == [props["id"]]
    assert service.pending("other-tenant") == []
    assert not task.done()

    await service.reply(TENANT, props["id"], "once")
    await asyncio.wait_for(task, 5)
    [replied] = published.of_type(ev.PERMISSION_REPLIED)
    assert replied.properties["reply"] == "once" and replied.properties["requestID"] == props["id"]
    row = await stored(store, props["id"])
    assert (row.status, row.decision, row.decided_by) == ("approved", "once", "local")
    assert service.pending(TENANT) == []


async def test_reject_with_feedback_rejects_every_waiting_call_of_the_session(
    store: Store, session_id: str, published: Published
) -> None:
    other_session = new_session()
    await store.write(session_created(other_session))
    service = PermissionService(store)
    first = asking(service, session_id, bash("make"))
    second = asking(service, session_id, bash("ls"))
    elsewhere = asking(service, other_session.id, bash("ls"))
    asked = await published.wait_for(ev.PERMISSION_ASKED, 3)
    first_id = next(e.properties["id"] for e in asked if e.properties["patterns"] == ["make"])

    await service.reply(TENANT, first_id, "reject", "use the Makefile target `test` instead", user="alice")

    with pytest.raises(CorrectedError) as corrected:
        await first
    assert str(corrected.value).endswith(
        "with the following feedback: use the Makefile target `test` instead"
    )
    assert corrected.value.blocks_loop
    with pytest.raises(RejectedError, match="rejected permission to use this specific tool call"):
        await second
    assert not elsewhere.done()
    row = await stored(store, first_id)
    assert (row.status, row.decision, row.decided_by) == ("denied", "reject", "alice")
    assert row.feedback == "use the Makefile target `test` instead"
    elsewhere.cancel()


async def test_always_releases_matching_waiting_calls_and_is_remembered(
    store: Store, session_id: str, published: Published
) -> None:
    service = PermissionService(store)
    first = asking(service, session_id, bash("git status"))
    second = asking(service, session_id, bash("git log"))
    unrelated = asking(service, session_id, bash("make"))
    asked = await published.wait_for(ev.PERMISSION_ASKED, 3)
    by_pattern = {e.properties["patterns"][0]: e.properties["id"] for e in asked}

    await service.reply(TENANT, by_pattern["git status"], "always")
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert not unrelated.done()
    released = await stored(store, by_pattern["git log"])
    assert (released.status, released.decision) == ("approved", "always")
    assert [p.patterns for p in service.pending(TENANT)] == [["make"]]

    # Later calls matching the approval go through without asking...
    await service.ask(TENANT, session_id, bash("git diff"), ASK_BASH)
    # ...also after a restart: the approval is read back from the stored requests.
    restarted = PermissionService(store)
    await restarted.ask(TENANT, session_id, bash("git push"), ASK_BASH)
    assert len(published.of_type(ev.PERMISSION_ASKED)) == 3
    # An approval never re-opens what a rule denies.
    with pytest.raises(DeniedError):
        await restarted.ask(TENANT, session_id, bash("rm -rf ."), ASK_BASH)
    unrelated.cancel()


async def test_an_unanswered_request_is_denied_at_its_deadline(
    store: Store, session_id: str, published: Published
) -> None:
    service = PermissionService(store, timeout_seconds=0.05)
    with pytest.raises(ExpiredError) as expired:
        await asyncio.wait_for(service.ask(TENANT, session_id, bash("ls"), ASK_BASH), 5)
    assert expired.value.blocks_loop
    [asked] = published.of_type(ev.PERMISSION_ASKED)
    times = asked.properties["time"]
    assert times["deadline"] - times["created"] == 50
    [replied] = await published.wait_for(ev.PERMISSION_REPLIED)
    assert replied.properties["reply"] == "reject"
    row = await stored(store, asked.properties["id"])
    assert (row.status, row.decision, row.decided_by) == ("expired", "timeout", "deadline")
    assert service.pending(TENANT) == []


async def test_the_deadline_can_default_to_allow(store: Store, session_id: str, published: Published) -> None:
    service = PermissionService(store, timeout_seconds=0.05, default="allow")
    await asyncio.wait_for(service.ask(TENANT, session_id, bash("ls"), ASK_BASH), 5)
    [replied] = await published.wait_for(ev.PERMISSION_REPLIED)
    row = await stored(store, replied.properties["requestID"])
    assert (row.status, row.decision, row.decided_by) == ("approved", "timeout", "deadline")


async def test_unknown_or_foreign_requests_cannot_be_answered(
    store: Store, session_id: str, published: Published
) -> None:
    service = PermissionService(store)
    with pytest.raises(UnknownPermissionRequestError):
        await service.reply(TENANT, "per_missing", "once")
    task = asking(service, session_id, bash("ls"))
    [asked] = await published.wait_for(ev.PERMISSION_ASKED)
    with pytest.raises(UnknownPermissionRequestError):
        await service.reply("other-tenant", asked.properties["id"], "once")
    assert service.waiting("other-tenant", asked.properties["id"]) is None
    assert service.waiting(TENANT, asked.properties["id"]) is not None
    task.cancel()


async def test_reject_session_and_cancellation_record_an_abort(
    store: Store, session_id: str, published: Published
) -> None:
    service = PermissionService(store)
    rejected = asking(service, session_id, bash("ls"))
    await published.wait_for(ev.PERMISSION_ASKED)
    assert service.reject_session(session_id) == 1
    with pytest.raises(RejectedError):
        await rejected

    cancelled = asking(service, session_id, bash("make"))
    await published.wait_for(ev.PERMISSION_ASKED, 2)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    replies = await published.wait_for(ev.PERMISSION_REPLIED, 2)
    for replied in replies:
        row = await stored(store, replied.properties["requestID"])
        assert (row.status, row.decision, row.decided_by) == ("denied", "reject", "abort")
    assert service.pending(TENANT) == []


async def test_a_policy_hook_decides_and_is_recorded(
    store: Store, session_id: str, published: Published
) -> None:
    seen: list[str] = []

    def policy(action: str | None) -> PolicyHook:
        async def decide(info: PermissionRequestInfo) -> PolicyDecision | None:
            seen.append(info.patterns[0])
            if action is None:
                return None
            return PolicyDecision(action="allow" if action == "allow" else "deny", by="plugin:guard")

        return decide

    service = PermissionService(store, policies=[policy(None), policy("allow")])
    await service.ask(TENANT, session_id, bash("ls"), ASK_BASH)
    service.policies = [policy("deny")]
    with pytest.raises(DeniedError, match="plugin:guard"):
        await service.ask(TENANT, session_id, bash("make"), ASK_BASH)

    assert seen == ["ls", "ls", "make"]
    rows = await store.permission_requests(TENANT, session_id)
    assert [(r.status, r.decision, r.decided_by) for r in rows] == [
        ("approved", "policy", "plugin:guard"),
        ("denied", "policy", "plugin:guard"),
    ]


async def test_deadline_and_default_come_from_the_config(store: Store) -> None:
    service = PermissionService.from_config(store, Config.model_validate({}))
    assert (service.timeout_seconds, service.default) == (300.0, "deny")
    configured = Config.model_validate({"permission_timeout": 0.2, "permission_default": "allow"})
    service = PermissionService.from_config(store, configured)
    assert (service.timeout_seconds, service.default) == (0.2, "allow")
    for bad in ({"permission_timeout": -1}, {"permission_timeout": "soon"}, {"permission_default": "maybe"}):
        with pytest.raises(ConfigError):
            PermissionService.from_config(store, Config.model_validate(bad))
