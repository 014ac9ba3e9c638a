"""The `auth` config section: validation of keys, secrets and networks, and what turns auth on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentforge.config import AuthConfig, ConfigError, is_loopback, load_config
from tests.identity.keys import GATEWAY_SECRET, HS_SECRET, rsa_key

JWT_BASE = {"issuer": "https://issuer.test", "audience": "forge"}


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)


def _auth(auth: dict[str, Any]) -> AuthConfig:
    config, _ = load_config(env={}, override={"auth": auth})
    return config.auth


def _invalid(auth: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        _auth(auth)
    return str(caught.value)


def test_the_default_is_local_mode_with_api_keys_accepted() -> None:
    auth = _auth({})
    assert auth.enabled("127.0.0.1") is False
    assert auth.enabled("0.0.0.0") is False  # serve refuses this bind
    assert auth.accepts_api_keys


def test_a_valid_jwt_and_gateway_config() -> None:
    auth = _auth(
        {
            "jwt": {**JWT_BASE, "algorithms": ["RS256"], "public_key": rsa_key().public_pem, "leeway": 30},
            "gateway": {"secret": GATEWAY_SECRET, "trusted_addresses": ["10.0.0.0/8", "::1"]},
        }
    )
    assert auth.jwt is not None and auth.jwt.tenant_claim == "tenant" and auth.jwt.user_claim == "sub"
    assert auth.gateway is not None and auth.gateway.max_skew_seconds == 300
    assert auth.enabled("127.0.0.1")


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ({"jwt": {**JWT_BASE}}, "exactly one of secret, public_key or jwks_url"),
        ({"jwt": {**JWT_BASE, "secret": HS_SECRET, "jwks_url": "https://x/jwks"}}, "exactly one of"),
        ({"jwt": {**JWT_BASE, "secret": "short"}}, "auth.jwt.secret must be at least 32 characters"),
        ({"jwt": {**JWT_BASE, "secret": ""}}, "auth.jwt.secret must be at least 32 characters"),
        ({"jwt": {**JWT_BASE, "secret": HS_SECRET, "algorithms": ["RS256"]}}, "set algorithms to ['HS256']"),
        ({"jwt": {**JWT_BASE, "jwks_url": "https://x/jwks"}}, "set algorithms to ['RS256']"),
        ({"jwt": {**JWT_BASE, "algorithms": ["none"], "secret": HS_SECRET}}, "auth.jwt.algorithms.0"),
        ({"jwt": {**JWT_BASE, "algorithms": ["RS256"], "jwks_url": "file:///etc/keys"}}, "http(s) URL"),
        ({"jwt": {"audience": "forge", "secret": HS_SECRET}}, "auth.jwt.issuer"),
        ({"gateway": {"secret": "short"}}, "auth.gateway.secret must be at least 32 characters"),
        (
            {"gateway": {"secret": GATEWAY_SECRET, "trusted_addresses": ["intranet"]}},
            "not an IP address or CIDR",
        ),
        ({"requird": True}, "auth.requird"),  # a misspelt security setting fails loudly
        ({"gateway": {"secret": GATEWAY_SECRET, "max_skew": 5}}, "auth.gateway.max_skew"),
    ],
)
def test_invalid_auth_configs_say_what_is_wrong(auth: dict[str, Any], message: str) -> None:
    assert message in _invalid(auth)


def test_secrets_come_from_env_and_file_substitution(tmp_path: Path) -> None:
    (tmp_path / "gateway.key").write_text(GATEWAY_SECRET + "\n")
    path = tmp_path / "agentforge.json"
    body = {
        "auth": {
            "jwt": {**JWT_BASE, "secret": "{env:JWT_SECRET}"},
            "gateway": {"secret": "{file:gateway.key}"},
        }
    }
    path.write_text(json.dumps(body))
    config, _ = load_config(config_path=path, directory=tmp_path, env={"JWT_SECRET": HS_SECRET})
    assert config.auth.jwt is not None and config.auth.jwt.secret == HS_SECRET
    assert config.auth.gateway is not None and config.auth.gateway.secret == GATEWAY_SECRET
    with pytest.raises(ConfigError, match=r"auth\.jwt\.secret must be at least 32 characters"):
        load_config(config_path=path, directory=tmp_path, env={})  # the variable is unset


def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "forge.example.com"))
