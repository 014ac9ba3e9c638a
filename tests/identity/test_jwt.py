"""Bearer JWTs: HS256, RS256 with a PEM key or a JWKS served over HTTP, and every refusal."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agentforge.config import JwtConfig
from agentforge.identity.errors import AuthFailure
from agentforge.identity.jwt import JwtVerifier
from agentforge.identity.model import ADMIN, MEMBER
from tests.fakes.jwks_server import FakeJwks
from tests.identity.keys import AUDIENCE, HS_SECRET, ISSUER, hs_token, rs_token, rsa_key


def _config(**options: Any) -> JwtConfig:
    base: dict[str, Any] = {"issuer": ISSUER, "audience": AUDIENCE}
    if not {"public_key", "jwks_url"} & options.keys():
        base["secret"] = HS_SECRET
    return JwtConfig.model_validate({**base, **options})


async def _refused(verifier: JwtVerifier, token: str) -> AuthFailure:
    with pytest.raises(AuthFailure) as caught:
        await verifier.verify(token)
    assert caught.value.method == "jwt"
    return caught.value


@pytest_asyncio.fixture
async def jwks() -> AsyncIterator[FakeJwks]:
    async with FakeJwks() as server:
        yield server


async def test_hs256_maps_tenant_user_and_roles() -> None:
    identity = await JwtVerifier(_config()).verify(hs_token(roles=["admin", "member"]))
    assert (identity.tenant, identity.user, identity.method) == ("acme", "alice", "jwt")
    assert identity.roles == frozenset({ADMIN, MEMBER})


async def test_claim_names_come_from_the_config() -> None:
    verifier = JwtVerifier(_config(tenant_claim="org", user_claim="email", roles_claim="groups"))
    token = hs_token(org="globex", email="carol@example.com", groups="admin", tenant=None, roles=None)
    identity = await verifier.verify(token)
    assert (identity.tenant, identity.user, identity.roles) == (
        "globex",
        "carol@example.com",
        frozenset({ADMIN}),
    )


async def test_rs256_with_a_pem_public_key() -> None:
    verifier = JwtVerifier(_config(algorithms=["RS256"], public_key=rsa_key().public_pem))
    assert (await verifier.verify(rs_token())).user == "alice"
    other = rsa_key("other")
    assert (await _refused(verifier, rs_token(other))).message == "invalid token"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"iss": "https://elsewhere.test"}, "token issuer not accepted"),
        ({"aud": "another-service"}, "token audience not accepted"),
        ({"exp": int(time.time()) - 60}, "token expired"),
        ({"nbf": int(time.time()) + 86_400}, "token not yet valid"),  # still ahead however slow the run
        ({"exp": None}, "token lacks the 'exp' claim"),
        ({"tenant": None}, "token lacks the 'tenant' claim"),
        ({"tenant": "Not A Tenant"}, "token's 'tenant' claim is not a valid tenant id"),
        ({"tenant": "_system"}, "token's 'tenant' claim is not a valid tenant id"),
        ({"sub": None}, "token lacks the 'sub' claim"),
    ],
)
async def test_bad_claims_are_refused_saying_what_is_wrong(overrides: dict[str, Any], message: str) -> None:
    failure = await _refused(JwtVerifier(_config()), hs_token(**overrides))
    assert (failure.status, failure.message) == (401, message)


async def test_a_bad_signature_or_garbage_is_just_invalid() -> None:
    verifier = JwtVerifier(_config())
    forged = await _refused(verifier, hs_token(secret="another-secret-that-is-long-enough-0123456789"))
    assert forged.message == "invalid token"
    assert forged.claimed_tenant == "acme"  # for the audit record, not trusted for anything else
    assert (await _refused(verifier, "not.a.jwt")).message == "invalid token"
    assert (await _refused(verifier, "garbage")).claimed_tenant is None


async def test_an_algorithm_outside_the_config_is_refused() -> None:
    verifier = JwtVerifier(_config())  # HS256 only
    assert (await _refused(verifier, rs_token())).message == "invalid token"


async def test_leeway_tolerates_a_little_clock_skew() -> None:
    token = hs_token(exp=int(time.time()) - 5)
    assert (await _refused(JwtVerifier(_config()), token)).message == "token expired"
    assert (await JwtVerifier(_config(leeway=60)).verify(token)).user == "alice"


async def test_jwks_is_fetched_once_and_cached(jwks: FakeJwks) -> None:
    jwks.document = {"keys": [rsa_key().jwk()]}
    verifier = JwtVerifier(_config(algorithms=["RS256"], jwks_url=jwks.url))
    try:
        for _ in range(3):
            assert (await verifier.verify(rs_token())).tenant == "acme"
        assert jwks.requests == 1
    finally:
        await verifier.aclose()


async def test_an_unknown_kid_refetches_the_set_once(jwks: FakeJwks) -> None:
    first, rotated = rsa_key("k1"), rsa_key("k2")
    jwks.document = {"keys": [first.jwk()]}
    verifier = JwtVerifier(_config(algorithms=["RS256"], jwks_url=jwks.url), jwks_refetch_interval=0)
    try:
        await verifier.verify(rs_token(first))
        jwks.document = {"keys": [first.jwk(), rotated.jwk()]}  # the issuer rotates
        assert (await verifier.verify(rs_token(rotated))).user == "alice"
        assert jwks.requests == 2
        failure = await _refused(verifier, rs_token(rotated, kid="nobody"))
        assert failure.message == "invalid token: signing key not found"
        assert jwks.requests == 3
    finally:
        await verifier.aclose()


async def test_unknown_kids_do_not_refetch_within_the_interval(jwks: FakeJwks) -> None:
    jwks.document = {"keys": [rsa_key().jwk()]}
    verifier = JwtVerifier(_config(algorithms=["RS256"], jwks_url=jwks.url), jwks_refetch_interval=3600)
    try:
        await verifier.verify(rs_token())
        for kid in ("x1", "x2", "x3"):
            await _refused(verifier, rs_token(kid=kid))
        assert jwks.requests == 1
    finally:
        await verifier.aclose()


async def test_an_unreachable_jwks_is_a_503_not_a_401(jwks: FakeJwks) -> None:
    jwks.status = 500
    verifier = JwtVerifier(_config(algorithms=["RS256"], jwks_url=jwks.url))
    try:
        failure = await _refused(verifier, rs_token())
        assert failure.status == 503
        assert "signing key set is unavailable" in failure.message
    finally:
        await verifier.aclose()


async def test_cached_keys_keep_working_when_a_refetch_fails(jwks: FakeJwks) -> None:
    jwks.document = {"keys": [rsa_key().jwk()]}
    config = _config(algorithms=["RS256"], jwks_url=jwks.url, jwks_ttl_seconds=0.001)
    verifier = JwtVerifier(config, jwks_refetch_interval=0)
    try:
        await verifier.verify(rs_token())
        jwks.status = 500
        await asyncio.sleep(0.01)  # past the TTL, so the next verification refetches
        assert (await verifier.verify(rs_token())).user == "alice"
        assert jwks.requests >= 2
    finally:
        await verifier.aclose()
