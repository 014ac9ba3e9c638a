"""Deployment checks that need no database: bind/auth, data directory, provider credentials."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentforge.config import load_settings
from agentforge.doctor import local
from agentforge.llm.provider import ProviderCatalog


def _settings(tmp_path: Path, config: dict[str, Any], host: str | None = None) -> Any:
    return load_settings(data_dir=tmp_path / "data", directory=tmp_path, host=host, config_override=config)


def test_bind_fails_on_a_public_address_without_auth(tmp_path: Path) -> None:
    result = local.check_bind(_settings(tmp_path, {}, host="0.0.0.0"), auth_configured=False)
    assert result.status == "fail" and "0.0.0.0" in result.detail


def test_bind_warns_in_local_mode_and_passes_with_auth(tmp_path: Path) -> None:
    assert local.check_bind(_settings(tmp_path, {}), auth_configured=False).status == "warn"
    assert local.check_bind(_settings(tmp_path, {}, host="0.0.0.0"), auth_configured=True).status == "pass"


@pytest.mark.parametrize(
    ("mode", "status"), [(0o700, "pass"), (0o750, "warn"), (0o770, "fail"), (0o777, "fail")]
)
def test_data_dir_permissions(tmp_path: Path, mode: int, status: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, mode)
    result = local.check_data_dir(data)
    assert result.status == status, result.detail


def test_missing_data_dir_only_warns(tmp_path: Path) -> None:
    assert local.check_data_dir(tmp_path / "absent").status == "warn"


def test_provider_without_a_key_fails_naming_it(tmp_path: Path) -> None:
    config = {
        "provider": {
            "acme": {"api": "openai", "options": {"baseURL": "https://llm.example.com/v1"}},
            "local": {"api": "openai", "options": {"baseURL": "http://127.0.0.1:11434/v1"}},
            "keyed": {"api": "anthropic", "options": {"apiKey": "sk-test"}},
        }
    }
    catalog = ProviderCatalog(_settings(tmp_path, config).config, env={})
    result = local.check_provider_keys(catalog, env={})
    assert result.status == "fail"
    assert result.detail == "no credentials for: acme"


def test_cloud_providers_use_cloud_credentials(tmp_path: Path) -> None:
    config = {"provider": {"bedrock": {"api": "anthropic-bedrock", "options": {"region": "us-east-1"}}}}
    catalog = ProviderCatalog(_settings(tmp_path, config).config, env={})
    assert local.check_provider_keys(catalog, env={}).status == "fail"
    assert local.check_provider_keys(catalog, env={"AWS_PROFILE": "prod"}).status == "pass"


def test_no_provider_at_all_fails(tmp_path: Path) -> None:
    catalog = ProviderCatalog(_settings(tmp_path, {}).config, env={})
    assert local.check_provider_keys(catalog, env={}).status == "fail"


def test_owner_url_is_recommended_on_postgres() -> None:
    assert local.check_owner_url("postgresql", None).status == "warn"
    assert local.check_owner_url("postgresql", "postgresql://owner@db/forge").status == "pass"
    assert local.check_owner_url("sqlite", None).status == "skip"
