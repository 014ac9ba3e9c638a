"""The Authenticator: which credential a request carries, local mode, and the failure hook."""

from __future__ import annotations

import base64
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from agentforge.config import AuthConfig, Config, JwtConfig, Settings
from agentforge.identity.apikeys import INVALID_KEY, StoredApiKey, mint_api_key
from agentforge.identity.authenticate import MISSING_TOKEN, NOT_BEARER, Authenticator
from agentforge.identity.errors import AuthFailure
from agentforge.identity.jwt import JwtVerifier
from agentforge.identity.model import ADMIN, LOCAL_IDENTITY, MEMBER, Identity
from agentforge.identity.request import RequestFacts
from tests.identity.keys import AUDIENCE, GATEWAY_SECRET, HS_SECRET, ISSUER, gateway_headers, hs_token

MEMBER_KEY = mint_api_key("acme", "ci", frozenset({MEMBER}), "test")


class Recorder:
    def __init__(self) -> None:
        self.failures: list[tuple[AuthFailure, RequestFacts]] = []

    async def __call__(self, failure: AuthFailure, facts: RequestFacts) -> None:
        self.failures.append((failure, facts))


async def _find_key(tenant: str, key_id: str) -> StoredApiKey | None:
    stored = MEMBER_KEY.stored
    return stored if (stored.key.tenant, stored.key.id) == (tenant, key_id) else None


def _authenticator(
    auth: dict[str, Any] | None = None, *, host: str = "127.0.0.1"
) -> tuple[Authenticator, Recorder]:
    settings = Settings(
        config=Config.model_validate({"auth": auth or {}}),
        data_dir=Path("unused"),  # not read by the authenticator
        database_url="sqlite:///unused.db",
        host=host,
        port=0,
        directory=Path("unused"),
    )
    recorder = Recorder()
    return Authenticator.from_settings(settings, find_key=_find_key, on_failure=recorder), recorder


def _facts(headers: dict[str, str] | None = None, target: str = "/session") -> RequestFacts:
    return RequestFacts.of("GET", target, "", (headers or {}).items(), "127.0.0.1")


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _refused(authenticator: Authenticator, facts: RequestFacts) -> AuthFailure:
    with pytest.raises(AuthFailure) as caught:
        await authenticator.authenticate(facts)
    return caught.value


JWT = {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "secret": HS_SECRET}}
GATEWAY = {"gateway": {"secret": GATEWAY_SECRET}}


@pytest.mark.parametrize(
    ("auth", "host", "enabled"),
    [
        ({}, "127.0.0.1", False),
        ({}, "0.0.0.0", False),  # serve refuses this bind; the authenticator alone would be open
        ({"api_keys": True}, "127.0.0.1", False),
        ({"api_keys": True}, "0.0.0.0", True),
        ({"required": True}, "127.0.0.1", True),
        (JWT, "127.0.0.1", True),
        (GATEWAY, "::1", True),
    ],
)
def test_what_turns_authentication_on(auth: dict[str, Any], host: str, enabled: bool) -> None:
    assert AuthConfig.model_validate(auth).enabled(host) is enabled
    assert _authenticator(auth, host=host)[0].enabled is enabled


async def test_local_mode_without_credentials_is_the_local_user() -> None:
    authenticator, recorder = _authenticator()
    assert await authenticator.authenticate(_facts()) == LOCAL_IDENTITY
    assert recorder.failures == []


async def test_local_mode_still_verifies_presented_credentials() -> None:
    authenticator, recorder = _authenticator()
    assert (await authenticator.authenticate(_facts(_bearer(MEMBER_KEY.token)))).tenant == "acme"
    failure = await _refused(authenticator, _facts(_bearer(MEMBER_KEY.token + "x")))
    assert failure.message == INVALID_KEY
    assert [f.message for f, _ in recorder.failures] == [INVALID_KEY]


async def test_required_auth_refuses_a_request_without_credentials() -> None:
    authenticator, recorder = _authenticator({"required": True})
    failure = await _refused(authenticator, _facts())
    assert (failure.status, failure.message, failure.method) == (401, MISSING_TOKEN, None)
    assert recorder.failures[0][1].target == "/session"


async def test_a_non_bearer_authorization_header_is_refused() -> None:
    authenticator, _ = _authenticator({"required": True})
    for value in ("Basic dXNlcjpwYXNz", "Bearer", "Bearer   "):
        assert (await _refused(authenticator, _facts({"Authorization": value}))).message == NOT_BEARER


def _basic(user: str, password: str) -> dict[str, str]:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {encoded}"}


async def test_basic_carries_an_api_key_as_its_password_and_nothing_else() -> None:
    authenticator, recorder = _authenticator({"required": True})
    identity = await authenticator.authenticate(_facts(_basic("opencode", MEMBER_KEY.token)))
    assert (identity.tenant, identity.method) == ("acme", "api_key")
    assert (await authenticator.authenticate(_facts(_basic("anyone", MEMBER_KEY.token)))) == identity
    # A wrong key is the same refusal as a wrong bearer key; other passwords are no credential here.
    assert (
        await _refused(authenticator, _facts(_basic("opencode", MEMBER_KEY.token + "x")))
    ).message == INVALID_KEY
    for headers in (_basic("opencode", hs_token()), _basic("opencode", ""), {"Authorization": "Basic !!"}):
        assert (await _refused(authenticator, _facts(headers))).message == NOT_BEARER
    assert len(recorder.failures) == 4


async def test_api_keys_can_be_switched_off() -> None:
    authenticator, _ = _authenticator({"required": True, "api_keys": False})
    failure = await _refused(authenticator, _facts(_bearer(MEMBER_KEY.token)))
    assert failure.message == "this server does not accept API keys"


async def test_a_jwt_needs_jwt_configured() -> None:
    without, _ = _authenticator({"required": True})
    failure = await _refused(without, _facts(_bearer(hs_token())))
    assert failure.message == "the bearer token is not an API key, and this server accepts no JWTs"
    with_jwt, _ = _authenticator(JWT)
    identity = await with_jwt.authenticate(_facts(_bearer(hs_token())))
    assert (identity.tenant, identity.user, identity.method) == ("acme", "alice", "jwt")
    # API keys are on too once any authentication is configured.
    assert (await with_jwt.authenticate(_facts(_bearer(MEMBER_KEY.token)))).method == "api_key"


async def test_identity_headers_without_a_gateway_are_refused() -> None:
    authenticator, recorder = _authenticator()
    headers = {"X-Forge-Tenant": "acme", "X-Forge-User": "root", "X-Forge-Roles": "admin"}
    failure = await _refused(authenticator, _facts(headers))
    assert failure.message == "identity headers are only accepted from a trusted gateway"
    assert failure.claimed_tenant == "acme"
    assert recorder.failures[0][0] is failure


async def test_gateway_headers_win_over_an_authorization_header() -> None:
    authenticator, _ = _authenticator(GATEWAY)
    headers = {**gateway_headers("GET", "/session"), **_bearer(MEMBER_KEY.token)}
    identity = await authenticator.authenticate(_facts(headers))
    assert (identity.user, identity.method) == ("bob", "gateway")


async def test_require_role_is_a_reported_403() -> None:
    authenticator, recorder = _authenticator()
    member = Identity("acme", "bob", frozenset({MEMBER}), "api_key")
    await authenticator.require_role(LOCAL_IDENTITY, ADMIN, _facts())
    with pytest.raises(AuthFailure) as caught:
        await authenticator.require_role(member, ADMIN, _facts())
    assert (caught.value.status, caught.value.message) == (403, "this endpoint needs the admin role")
    assert recorder.failures[0][0].claimed_tenant == "acme"


async def test_a_failing_hook_does_not_change_the_answer() -> None:
    authenticator, _ = _authenticator({"required": True})

    async def broken(failure: AuthFailure, facts: RequestFacts) -> None:
        raise RuntimeError("audit store down")

    authenticator.on_failure = broken
    assert (await _refused(authenticator, _facts())).message == MISSING_TOKEN


# -- still_valid: what a long-lived request re-checks -----------------------------------------------------


class Keys:
    """A key store whose record can change between two looks, as revoking one does."""

    def __init__(self, stored: StoredApiKey | None) -> None:
        self.stored = stored
        self.lookups: list[tuple[str, str]] = []

    async def __call__(self, tenant: str, key_id: str) -> StoredApiKey | None:
        self.lookups.append((tenant, key_id))
        return self.stored


def _checker(keys: Keys, now: list[float]) -> Authenticator:
    return Authenticator(AuthConfig(), enabled=True, find_key=keys, clock=lambda: now[0])


async def test_a_key_identity_stays_valid_until_its_key_is_revoked_or_gone() -> None:
    keys = Keys(MEMBER_KEY.stored)
    authenticator = _checker(keys, [0.0])
    caller = await authenticator.authenticate(_facts(_bearer(MEMBER_KEY.token)))
    assert caller.key_id == MEMBER_KEY.stored.key.id and caller.expires_at is None
    assert await authenticator.still_valid(caller)
    revoked = dataclasses.replace(MEMBER_KEY.stored.key, time_revoked=1)
    keys.stored = dataclasses.replace(MEMBER_KEY.stored, key=revoked)
    assert not await authenticator.still_valid(caller)
    keys.stored = None
    assert not await authenticator.still_valid(caller)
    # Read afresh every time, never from a cache.
    assert keys.lookups == [("acme", MEMBER_KEY.stored.key.id)] * 4


async def test_a_jwt_identity_lapses_at_its_exp_plus_leeway() -> None:
    jwt_config = JwtConfig(issuer=ISSUER, audience=AUDIENCE, secret=HS_SECRET, leeway=5)
    now = [0.0]
    keys = Keys(None)
    verifier = JwtVerifier(jwt_config)
    authenticator = Authenticator(
        AuthConfig(jwt=jwt_config), enabled=True, find_key=keys, jwt=verifier, clock=lambda: now[0]
    )
    exp = int(time.time()) + 60
    caller = await authenticator.authenticate(_facts(_bearer(hs_token(exp=exp))))
    assert caller.expires_at == exp + 5
    now[0] = exp + 4.9
    assert await authenticator.still_valid(caller)
    now[0] = exp + 5
    assert not await authenticator.still_valid(caller)
    assert keys.lookups == []


async def test_local_and_unexpiring_identities_stay_valid() -> None:
    authenticator = _checker(Keys(None), [1e12])
    assert await authenticator.still_valid(LOCAL_IDENTITY)
    assert await authenticator.still_valid(Identity("acme", "bob", frozenset({MEMBER}), "gateway"))
    assert not await authenticator.still_valid(Identity("acme", "bob", method="gateway", expires_at=1e12))
