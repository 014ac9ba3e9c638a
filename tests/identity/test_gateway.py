"""Signed identity headers from a trusted gateway: valid, forged, unsigned, stale, replayed, untrusted."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agentforge.config import GatewayConfig
from agentforge.identity.errors import AuthFailure
from agentforge.identity.gateway import GatewayVerifier, NonceWindow, canonical_string, sign
from agentforge.identity.model import ADMIN, MEMBER
from agentforge.identity.request import RequestFacts
from tests.identity.keys import GATEWAY_SECRET, gateway_headers


def _verifier(**options: Any) -> GatewayVerifier:
    return GatewayVerifier(GatewayConfig.model_validate({"secret": GATEWAY_SECRET, **options}))


def _facts(
    headers: dict[str, str], *, method: str = "GET", target: str = "/session", peer: str = "10.0.0.5"
) -> RequestFacts:
    path, _, query = target.partition("?")
    return RequestFacts.of(method, path, query, headers.items(), peer)


def _refused(verifier: GatewayVerifier, facts: RequestFacts) -> AuthFailure:
    with pytest.raises(AuthFailure) as caught:
        verifier.verify(facts)
    assert caught.value.method == "gateway"
    return caught.value


def test_the_canonical_string_is_documented_and_stable() -> None:
    text = canonical_string("post", "/session?x=1", "acme", "bob", "admin", "1700000000", "n" * 16)
    assert text == "agentforge-gateway-v1\nPOST\n/session?x=1\nacme\nbob\nadmin\n1700000000\n" + "n" * 16
    assert len(sign(GATEWAY_SECRET, text)) == 64


def test_valid_signed_headers_give_the_identity() -> None:
    headers = gateway_headers("POST", "/session?directory=%2Ftmp", roles="admin,member")
    identity = _verifier().verify(_facts(headers, method="POST", target="/session?directory=%2Ftmp"))
    assert (identity.tenant, identity.user, identity.method) == ("acme", "bob", "gateway")
    assert identity.roles == frozenset({ADMIN, MEMBER})


def test_without_roles_the_user_is_a_member() -> None:
    identity = _verifier().verify(_facts(gateway_headers("GET", "/session", roles=None)))
    assert identity.roles == frozenset({MEMBER})


@pytest.mark.parametrize(
    "tamper",
    [
        {"X-Forge-Tenant": "globex"},
        {"X-Forge-User": "mallory"},
        {"X-Forge-Roles": "admin"},
        {"X-Forge-Signature": "0" * 64},
    ],
)
def test_forged_headers_are_refused(tamper: dict[str, str]) -> None:
    headers = {**gateway_headers("GET", "/session"), **tamper}
    assert _refused(_verifier(), _facts(headers)).message == "invalid gateway signature"


def test_a_signature_for_another_request_or_key_is_refused() -> None:
    other_path = gateway_headers("GET", "/session/ses_1")
    assert _refused(_verifier(), _facts(other_path)).message == "invalid gateway signature"
    other_key = gateway_headers("GET", "/session", secret="another-gateway-secret-long-enough-0123456")
    assert _refused(_verifier(), _facts(other_key)).message == "invalid gateway signature"


@pytest.mark.parametrize(
    "missing", ["X-Forge-Signature", "X-Forge-Timestamp", "X-Forge-Nonce", "X-Forge-User"]
)
def test_unsigned_or_incomplete_headers_say_what_is_missing(missing: str) -> None:
    headers = gateway_headers("GET", "/session")
    del headers[missing]
    assert _refused(_verifier(), _facts(headers)).message == f"missing {missing} header"


def test_a_stale_or_future_timestamp_is_refused() -> None:
    verifier = _verifier(max_skew_seconds=300)
    stale = gateway_headers("GET", "/session", timestamp=int(time.time()) - 301)
    assert _refused(verifier, _facts(stale)).message.startswith("stale gateway request")
    future = gateway_headers("GET", "/session", timestamp=int(time.time()) + 301)
    assert _refused(verifier, _facts(future)).message.startswith("stale gateway request")


def test_a_replayed_nonce_is_refused() -> None:
    verifier = _verifier()
    headers = gateway_headers("GET", "/session")
    verifier.verify(_facts(headers))
    failure = _refused(verifier, _facts(headers))
    assert failure.message == "replayed gateway request: X-Forge-Nonce was already used"
    assert failure.claimed_tenant == "acme"


def test_headers_from_an_untrusted_peer_are_refused_before_anything_else() -> None:
    verifier = _verifier(trusted_addresses=["10.0.0.0/24", "::1"])
    headers = gateway_headers("GET", "/session")
    assert verifier.verify(_facts(headers, peer="10.0.0.9")).user == "bob"
    refused = _refused(verifier, _facts(gateway_headers("GET", "/session"), peer="192.168.1.2"))
    assert refused.message == "identity headers are only accepted from a trusted gateway"


def test_an_invalid_tenant_is_refused_even_when_signed() -> None:
    headers = gateway_headers("GET", "/session", tenant="_system")
    failure = _refused(_verifier(), _facts(headers))
    assert failure.message == "X-Forge-Tenant is not a valid tenant id"
    assert failure.claimed_tenant is None


def test_malformed_timestamp_and_nonce() -> None:
    assert (
        "unix seconds"
        in _refused(
            _verifier(), _facts({**gateway_headers("GET", "/session"), "X-Forge-Timestamp": "yesterday"})
        ).message
    )
    assert (
        "X-Forge-Nonce must be"
        in _refused(_verifier(), _facts(gateway_headers("GET", "/session", nonce="short"))).message
    )


def test_the_nonce_window_forgets_expired_nonces_and_stays_bounded() -> None:
    window = NonceWindow(capacity=2)
    assert window.remember("a", expires_at=10, now=0)
    assert not window.remember("a", expires_at=10, now=5)
    assert window.remember("b", expires_at=20, now=5)
    with pytest.raises(AuthFailure) as caught:
        window.remember("c", expires_at=20, now=5)
    assert caught.value.status == 503
    assert window.remember("c", expires_at=30, now=11)  # "a" expired, room again
    assert len(window) == 2
    assert not window.remember("b", expires_at=20, now=11)  # still inside its window: a replay
