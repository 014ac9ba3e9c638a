"""Identity on every request, through HTTP against the real app served on a loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from agentforge.client.sse import aiter_events
from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.config import ConfigError, load_settings
from agentforge.identity.apikeys import MintedApiKey, mint_api_key
from agentforge.identity.errors import AuthFailure
from agentforge.identity.failures import FailureThrottle
from agentforge.identity.model import ADMIN, MEMBER
from agentforge.identity.request import RequestFacts
from agentforge.model.events import SERVER_CONNECTED, SERVER_HEARTBEAT, STREAM_UNAUTHORIZED
from agentforge.runtime.runtime import Runtime
from agentforge.server.app import create_app
from agentforge.server.deps import AdminDep
from agentforge.server.serve import ForgeServer
from agentforge.store import Store
from agentforge.testing import FakeClock
from tests.e2e.harness import EventCollector, fake_provider_config
from tests.fakes.openai_server import FakeOpenAI
from tests.identity.keys import AUDIENCE, GATEWAY_SECRET, HS_SECRET, ISSUER, gateway_headers, hs_token

REQUIRED: dict[str, Any] = {"required": True}
JWT: dict[str, Any] = {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "secret": HS_SECRET}}
GATEWAY: dict[str, Any] = {"gateway": {"secret": GATEWAY_SECRET, "trusted_addresses": ["127.0.0.1/32"]}}
# Readiness is open like health: load balancers probe it (it names failed checks, no details).
OPEN_PATHS = {
    "/global/health",
    "/global/ready",
    "/openapi.json",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/_test/admin",
}


@dataclass
class AuthServer:
    app: FastAPI
    client: httpx2.AsyncClient
    failures: list[tuple[AuthFailure, RequestFacts]]
    database_url: str

    @property
    def store(self) -> Store:
        runtime: Runtime = self.app.state.runtime
        return runtime.store

    async def new_key(self, tenant: str = "acme", *roles: str) -> MintedApiKey:
        minted = mint_api_key(tenant, "test", frozenset(roles or {MEMBER}), "test")
        await self.store.create_api_key(minted.stored)
        return minted


def _add_admin_route(app: FastAPI) -> None:
    """A small admin-only route: the admin dependency exactly as routes will use it."""

    @app.get("/_test/admin")
    async def admin_only(caller: AdminDep) -> dict[str, str]:
        return {"user": caller.user}


@contextlib.asynccontextmanager
async def serve(
    tmp_path: Path,
    fake: FakeOpenAI,
    auth: dict[str, Any],
    database_url: str | None = None,
    *,
    failure_throttle: FailureThrottle | None = None,
    config: dict[str, Any] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> AsyncIterator[AuthServer]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    url = database_url or f"sqlite:///{tmp_path / 'forge.db'}"
    settings = load_settings(
        data_dir=tmp_path / "data",
        database_url=url,
        directory=workspace,
        config_override={**fake_provider_config(fake), "auth": auth, **(config or {})},
    )
    failures: list[tuple[AuthFailure, RequestFacts]] = []

    async def record(failure: AuthFailure, facts: RequestFacts) -> None:
        failures.append((failure, facts))

    app = create_app(settings, on_auth_failure=record, failure_throttle=failure_throttle, clock=clock)
    _add_admin_route(app)
    server = ForgeServer(app, host="127.0.0.1", port=0, log_level="warning")
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.005)
    base = f"http://127.0.0.1:{server.bound_port}"
    async with httpx2.AsyncClient(base_url=base, timeout=30) as client:
        try:
            yield AuthServer(app, client, failures, url)
        finally:
            server.should_exit = True
            await task


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _stream_types(
    forge: AuthServer,
    headers: dict[str, str],
    *,
    after_first_heartbeat: Callable[[], Awaitable[None]] | None = None,
) -> list[str]:
    """The event types of one `GET /event` stream, read until the server ends it (heartbeats every
    0.1 s, so the credential is re-checked often); `after_first_heartbeat` runs once one arrived."""
    forge.app.state.sse_heartbeat_seconds = 0.1
    types: list[str] = []
    async with asyncio.timeout(20), forge.client.stream("GET", "/event", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for event in aiter_events(response.aiter_bytes()):
            types.append(event.type)
            first_heartbeat = event.type == SERVER_HEARTBEAT and types.count(SERVER_HEARTBEAT) == 1
            if first_heartbeat and after_first_heartbeat is not None:
                await after_first_heartbeat()
    return types


def _assert_ended_unauthorized(types: list[str]) -> None:
    assert types[0] == SERVER_CONNECTED
    assert SERVER_HEARTBEAT in types  # the credential passed its re-checks until it lapsed
    assert types[-1] == STREAM_UNAUTHORIZED
    assert types.count(STREAM_UNAUTHORIZED) == 1


def _assert_401(response: httpx2.Response, message: str) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["name"] == "UnauthorizedError"
    assert response.json()["data"]["message"] == message


# -- API keys ---------------------------------------------------------------------------------------------


async def test_an_api_key_works_and_stops_at_once_when_revoked_elsewhere(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED, database_url) as forge:
        minted = await forge.new_key("acme")
        created = await forge.client.post("/session", json={"title": "mine"}, headers=_bearer(minted.token))
        assert created.status_code == 200, created.text
        listed = await forge.client.get("/session", headers=_bearer(minted.token))
        assert [s["title"] for s in listed.json()] == ["mine"]
        # Revoked through another store on the same database, as `agentforge keys revoke` does.
        other = await Store.open(forge.database_url)
        try:
            assert await other.revoke_api_key("acme", minted.stored.key.id) is not None
        finally:
            await other.close()
        again = await forge.client.get("/session", headers=_bearer(minted.token))
        _assert_401(again, "invalid or revoked API key")


async def test_wrong_secret_unknown_id_and_garbage_get_the_same_answer(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        minted = await forge.new_key("acme")
        prefix, tenant, key_id, secret = minted.token.split(".")
        tokens = [
            f"{prefix}.{tenant}.{key_id}.{secret[::-1]}",
            f"{prefix}.{tenant}.key_000000000000unknownkey0001.{secret}",
            f"{prefix}.globex.{key_id}.{secret}",
            "afk.garbage",
        ]
        bodies = []
        for token in tokens:
            response = await forge.client.get("/session", headers=_bearer(token))
            _assert_401(response, "invalid or revoked API key")
            bodies.append(response.content)
        assert len(set(bodies)) == 1
        assert [f.claimed_tenant for f, _ in forge.failures] == ["acme", "acme", "globex", None]


async def test_the_key_user_is_the_actor_of_what_it_writes(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        minted = await forge.new_key("acme")
        runtime: Runtime = forge.app.state.runtime
        subscription = runtime.bus.subscribe(lambda event: event.type == "session.created")
        created = (await forge.client.post("/session", headers=_bearer(minted.token))).json()
        batch = await subscription.next_batch(timeout=10)
        assert batch is not None
        [event] = batch
        assert (event.session_id, event.tenant_id) == (created["id"], "acme")
        assert event.actor == f"key:{minted.stored.key.id}"


# -- what needs credentials -------------------------------------------------------------------------------


async def test_every_route_but_health_and_docs_needs_credentials(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        spec = (await forge.client.get("/openapi.json")).json()
        checked = 0
        for route, operations in spec["paths"].items():
            if route in OPEN_PATHS:
                continue
            path = route.replace("{", "").replace("}", "")  # any value: authentication comes first
            for method in operations:
                response = await forge.client.request(method.upper(), path)
                assert response.status_code == 401, (method, route, response.text)
                checked += 1
        assert checked >= 25
        health = await forge.client.get("/global/health")
        assert health.status_code == 200
        assert (await forge.client.get("/openapi.json")).status_code == 200


async def test_a_missing_token_is_refused_and_reported(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        response = await forge.client.get("/session?search=x")
        _assert_401(response, "missing bearer token: send Authorization: Bearer <API key or JWT>")
        [(failure, facts)] = forge.failures
        assert (failure.status, facts.method, facts.target, facts.peer) == (
            401,
            "GET",
            "/session?search=x",
            "127.0.0.1",
        )


async def test_the_event_stream_authenticates_before_streaming(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        async with forge.client.stream("GET", "/event") as refused:
            assert refused.status_code == 401
            assert refused.headers["content-type"].startswith("application/json")
        minted = await forge.new_key("acme")
        collector = EventCollector()
        await collector.start(forge.client, "/event", **_bearer(minted.token))
        try:
            created = (await forge.client.post("/session", headers=_bearer(minted.token))).json()
            await collector.wait_for(
                lambda f: f.type == "session.created" and f.properties["info"]["id"] == created["id"]
            )
        finally:
            await collector.stop()


async def test_an_open_event_stream_ends_once_its_key_is_revoked_elsewhere(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED, database_url) as forge:
        minted = await forge.new_key("acme")
        kept = await forge.new_key("acme")

        async def revoke() -> None:
            other = await Store.open(forge.database_url)
            try:
                assert await other.revoke_api_key("acme", minted.stored.key.id) is not None
            finally:
                await other.close()

        types = await _stream_types(forge, _bearer(minted.token), after_first_heartbeat=revoke)
        _assert_ended_unauthorized(types)
        # Only that key's streams end: another key of the tenant keeps streaming.
        collector = EventCollector()
        await collector.start(forge.client, "/event", **_bearer(kept.token))
        try:
            await collector.wait_for(lambda f: f.type == SERVER_HEARTBEAT, start=len(collector.frames))
            await collector.wait_for(lambda f: f.type == SERVER_HEARTBEAT, start=len(collector.frames))
            assert not collector.of_type(STREAM_UNAUTHORIZED)
        finally:
            await collector.stop()


async def test_an_open_event_stream_ends_once_its_jwt_expires(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, JWT) as forge:
        # Four seconds ahead: 3-4 s of life, ample for the first heartbeats (every 0.1 s) on a loaded
        # machine (CI once opened the stream after a token of 1-2 s had lapsed).
        token = hs_token(exp=int(time.time()) + 4)
        _assert_ended_unauthorized(await _stream_types(forge, _bearer(token)))
        refused = await forge.client.get("/session", headers=_bearer(token))
        _assert_401(refused, "token expired")


async def test_an_event_stream_through_the_gateway_lives_while_its_signature_is_fresh(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    short = {"gateway": {**GATEWAY["gateway"], "max_skew_seconds": 2}}
    clock = FakeClock()
    async with serve(tmp_path, fake_openai, short, clock=clock) as forge:
        headers = gateway_headers("GET", "/event", timestamp=int(clock.time()))

        async def lapse() -> None:  # the signature ages past the skew once the stream is going
            clock.advance(2.5)

        _assert_ended_unauthorized(await _stream_types(forge, headers, after_first_heartbeat=lapse))


async def test_a_member_calling_an_admin_route_gets_403(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(tmp_path, fake_openai, REQUIRED) as forge:
        member = await forge.new_key("acme", MEMBER)
        admin = await forge.new_key("acme", ADMIN)
        refused = await forge.client.get("/_test/admin", headers=_bearer(member.token))
        assert refused.status_code == 403
        assert refused.json()["data"]["message"] == "this endpoint needs the admin role"
        assert forge.failures[-1][0].status == 403
        allowed = await forge.client.get("/_test/admin", headers=_bearer(admin.token))
        assert allowed.json() == {"user": f"key:{admin.stored.key.id}"}


# -- local mode -------------------------------------------------------------------------------------------


async def test_local_mode_needs_no_credentials_but_refuses_identity_headers(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, {}) as forge:
        assert (await forge.client.get("/session")).status_code == 200
        assert (await forge.client.get("/_test/admin")).json() == {"user": "local"}
        forged = {"X-Forge-Tenant": "acme", "X-Forge-User": "root", "X-Forge-Roles": "admin"}
        response = await forge.client.get("/session", headers=forged)
        _assert_401(response, "identity headers are only accepted from a trusted gateway")
        assert forge.failures[0][0].claimed_tenant == "acme"


# -- JWT --------------------------------------------------------------------------------------------------


async def test_jwt_tenants_see_only_their_own_sessions(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(tmp_path, fake_openai, JWT) as forge:
        acme, globex = _bearer(hs_token(tenant="acme")), _bearer(hs_token(tenant="globex", sub="gus"))
        created = (await forge.client.post("/session", json={"title": "acme only"}, headers=acme)).json()
        assert [s["id"] for s in (await forge.client.get("/session", headers=acme)).json()] == [created["id"]]
        assert (await forge.client.get("/session", headers=globex)).json() == []
        assert (await forge.client.get(f"/session/{created['id']}", headers=globex)).status_code == 404


async def test_expired_and_forged_jwts_are_refused(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(tmp_path, fake_openai, JWT) as forge:
        expired = hs_token(exp=int(time.time()) - 60)
        _assert_401(await forge.client.get("/session", headers=_bearer(expired)), "token expired")
        forged = hs_token(secret="an-attackers-own-secret-long-enough-012345")
        _assert_401(await forge.client.get("/session", headers=_bearer(forged)), "invalid token")
        _assert_401(
            await forge.client.get("/session"),
            "missing bearer token: send Authorization: Bearer <API key or JWT>",
        )


# -- trusted gateway --------------------------------------------------------------------------------------


async def test_signed_gateway_headers_are_accepted_once(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(tmp_path, fake_openai, GATEWAY) as forge:
        headers = gateway_headers("POST", "/session", tenant="acme", user="bob")
        created = await forge.client.post("/session", json={"title": "via gateway"}, headers=headers)
        assert created.status_code == 200, created.text
        replayed = await forge.client.post("/session", json={"title": "again"}, headers=headers)
        _assert_401(replayed, "replayed gateway request: X-Forge-Nonce was already used")
        listing = gateway_headers("GET", "/session?limit=5")
        titles = [s["title"] for s in (await forge.client.get("/session?limit=5", headers=listing)).json()]
        assert titles == ["via gateway"]


async def test_a_signed_request_accepted_by_one_replica_is_refused_by_another(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("replicas share Postgres; a SQLite database serves one process")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        serve(tmp_path / "a", fake_openai, GATEWAY, database_url) as a,
        serve(tmp_path / "b", fake_openai, GATEWAY, database_url) as b,
    ):
        headers = gateway_headers("POST", "/session", tenant="acme", user="bob")
        created = await a.client.post("/session", json={"title": "via gateway"}, headers=headers)
        assert created.status_code == 200, created.text
        replayed = await b.client.post("/session", json={"title": "again"}, headers=headers)
        _assert_401(replayed, "replayed gateway request: X-Forge-Nonce was already used")


async def test_forged_unsigned_and_stale_gateway_headers_are_refused(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, GATEWAY) as forge:
        forged = {**gateway_headers("GET", "/session"), "X-Forge-Tenant": "globex"}
        _assert_401(await forge.client.get("/session", headers=forged), "invalid gateway signature")
        unsigned = {"X-Forge-Tenant": "acme", "X-Forge-User": "bob"}
        _assert_401(await forge.client.get("/session", headers=unsigned), "missing X-Forge-Timestamp header")
        stale = gateway_headers("GET", "/session", timestamp=int(time.time()) - 3600)
        response = await forge.client.get("/session", headers=stale)
        assert response.status_code == 401
        assert response.json()["data"]["message"].startswith("stale gateway request")
        assert len(forge.failures) == 3


async def test_gateway_headers_from_an_untrusted_address_are_refused(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    untrusted = {"gateway": {"secret": GATEWAY_SECRET, "trusted_addresses": ["10.1.0.0/16"]}}
    async with serve(tmp_path, fake_openai, untrusted) as forge:
        response = await forge.client.get("/session", headers=gateway_headers("GET", "/session"))
        _assert_401(response, "identity headers are only accepted from a trusted gateway")


KEYS: dict[str, Any] = {"required": True, "api_keys": True}
METRICS_TOKEN = "mtk_" + "7Qp2xV9kLm3Rt8Wz4Yb6Nc1Hd5Jf0Gs2"


async def test_metrics_need_the_operator_token_when_auth_is_on(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    operator = {"telemetry": {"metrics_token": METRICS_TOKEN}}
    async with serve(tmp_path, fake_openai, KEYS, config=operator) as forge:
        _assert_401(
            await forge.client.get("/metrics"),
            "missing bearer token: send Authorization: Bearer <telemetry.metrics_token>",
        )
        # They count every tenant's work: no tenant's credential reads them, not even an admin's.
        member = await forge.new_key("acme")
        admin = await forge.new_key("acme", ADMIN)
        for token in (member.token, admin.token, METRICS_TOKEN[:-1] + "x", METRICS_TOKEN + "x"):
            _assert_401(await forge.client.get("/metrics", headers=_bearer(token)), "invalid metrics token")
        assert [failure.message for failure, _ in forge.failures][-4:] == ["invalid metrics token"] * 4
        response = await forge.client.get("/metrics", headers=_bearer(METRICS_TOKEN))
        assert response.status_code == 200 and "agentforge_turns_started_total" in response.text
        # The operator's token is good for the metrics only.
        response = await forge.client.get("/session", headers=_bearer(METRICS_TOKEN))
        _assert_401(response, "the bearer token is not an API key, and this server accepts no JWTs")


async def test_metrics_are_refused_when_auth_is_on_and_no_token_is_configured(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with serve(tmp_path, fake_openai, KEYS) as forge:
        _assert_401(
            await forge.client.get("/metrics"),
            "missing bearer token: send Authorization: Bearer <telemetry.metrics_token>",
        )
        admin = await forge.new_key("acme", ADMIN)
        for token in (admin.token, METRICS_TOKEN):
            response = await forge.client.get("/metrics", headers=_bearer(token))
            assert response.status_code == 403, response.text
            assert "set telemetry.metrics_token in the server config" in response.json()["data"]["message"]


def test_a_short_metrics_token_is_refused_at_load(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    with pytest.raises(ConfigError, match=r"telemetry\.metrics_token must be at least 32 characters"):
        load_settings(
            data_dir=tmp_path / "data",
            directory=tmp_path,
            config_override={"telemetry": {"metrics_token": "short"}},
        )


async def test_metrics_stay_open_to_the_local_user_in_local_mode(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    operator = {"telemetry": {"metrics_token": METRICS_TOKEN}}
    async with serve(tmp_path, fake_openai, {}, config=operator) as forge:
        assert (await forge.client.get("/metrics")).status_code == 200
        assert (await forge.client.get("/metrics", headers=_bearer(METRICS_TOKEN))).status_code == 200
        # A presented credential is still verified: a wrong one is refused, not ignored.
        response = await forge.client.get("/metrics", headers=_bearer("not-the-token"))
        assert response.status_code == 401, response.text
