"""API key tokens: format, hashing, and one answer for every way a token can be wrong."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from agentforge.identity.apikeys import (
    INVALID_KEY,
    is_api_key_token,
    mint_api_key,
    parse_token,
    verify_presented,
)
from agentforge.identity.errors import AuthFailure
from agentforge.identity.model import ADMIN, MEMBER, InvalidTenantId


def test_a_minted_token_names_tenant_and_key_and_only_the_hash_is_kept() -> None:
    minted = mint_api_key("acme", "ci", frozenset({ADMIN}), "test")
    prefix, tenant, key_id, secret = minted.token.split(".")
    assert (prefix, tenant, key_id) == ("afk", "acme", minted.stored.key.id)
    assert key_id.startswith("key_")
    assert len(secret) >= 43  # 256 bits, urlsafe base64
    assert minted.stored.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in repr(minted.stored)
    assert is_api_key_token(minted.token)


def test_two_keys_never_share_a_secret() -> None:
    tokens = {mint_api_key("acme", "k", frozenset({MEMBER}), "t").token.split(".")[3] for _ in range(50)}
    assert len(tokens) == 50


def test_minting_refuses_an_invalid_tenant() -> None:
    with pytest.raises(InvalidTenantId):
        mint_api_key("Bad.Tenant", "k", frozenset({MEMBER}), "t")


def test_the_right_token_gives_the_keys_identity() -> None:
    minted = mint_api_key("acme", "ci", frozenset({ADMIN, MEMBER}), "test")
    identity = verify_presented(parse_token(minted.token), minted.stored)
    assert identity.tenant == "acme"
    assert identity.user == f"key:{minted.stored.key.id}"
    assert identity.roles == frozenset({ADMIN, MEMBER})
    assert identity.method == "api_key"


def _failure_of(token: str, stored: object) -> AuthFailure:
    with pytest.raises(AuthFailure) as caught:
        verify_presented(parse_token(token), stored)  # type: ignore[arg-type]
    return caught.value


def test_wrong_secret_unknown_key_and_revoked_key_get_the_same_answer() -> None:
    minted = mint_api_key("acme", "ci", frozenset({MEMBER}), "test")
    prefix, tenant, key_id, secret = minted.token.split(".")
    wrong_secret = _failure_of(f"{prefix}.{tenant}.{key_id}.{secret[:-1]}x", minted.stored)
    unknown = _failure_of(minted.token, None)
    revoked_key = dataclasses.replace(minted.stored.key, time_revoked=1)
    revoked = _failure_of(minted.token, dataclasses.replace(minted.stored, key=revoked_key))
    for failure in (wrong_secret, unknown, revoked):
        assert (failure.status, failure.message, failure.method) == (401, INVALID_KEY, "api_key")
        assert failure.claimed_tenant == "acme"


def test_a_record_of_another_tenant_or_id_never_matches() -> None:
    minted = mint_api_key("acme", "ci", frozenset({MEMBER}), "test")
    other = dataclasses.replace(minted.stored, key=dataclasses.replace(minted.stored.key, tenant="other"))
    assert _failure_of(minted.token, other).message == INVALID_KEY


@pytest.mark.parametrize(
    "token",
    [
        "afk",
        "afk.acme",
        "afk.acme.key_1",
        "afk.acme.key_1.",
        "afk..key_1.s",
        "afk.ACME.key_1.s",
        "afk.a.b.c.d",
    ],
)
def test_malformed_tokens_get_the_same_answer(token: str) -> None:
    with pytest.raises(AuthFailure) as caught:
        parse_token(token)
    assert caught.value.message == INVALID_KEY
    assert caught.value.status == 401
