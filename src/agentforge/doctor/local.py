"""Checks that need no database: config keys, bind and authentication, the data directory, provider
credentials."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from agentforge.config import Config, Settings, is_loopback
from agentforge.config.keys import unknown_keys
from agentforge.doctor.result import CheckResult, failed, passed, skipped, warned
from agentforge.llm.provider import ProviderCatalog, ProviderCredential

# APIs whose requests carry an API key; the Anthropic cloud clients use the cloud's credentials.
_KEYED_APIS = frozenset({"openai", "openai-responses", "anthropic", "google", "azure"})


def check_bind(settings: Settings, auth_configured: bool) -> CheckResult:
    name = "bind and authentication"
    if auth_configured:
        return passed(name, f"{settings.host}:{settings.port} with authentication configured")
    if is_loopback(settings.host):
        return warned(name, f"{settings.host} is loopback; no authentication configured (local mode)")
    return failed(name, f"{settings.host} is not loopback and no authentication is configured")


def check_data_dir(data_dir: Path) -> CheckResult:
    name = "data directory permissions"
    if not data_dir.exists():
        return warned(name, f"{data_dir} does not exist yet (created on first start)")
    info = data_dir.stat()
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.getuid():
        return failed(name, f"{data_dir} is owned by uid {info.st_uid}, not the server's uid {os.getuid()}")
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return failed(name, f"{data_dir} is writable by group or others (mode {mode:o}); use 700")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return warned(name, f"{data_dir} is readable by group or others (mode {mode:o}); use 700")
    return passed(name, f"{data_dir} (mode {mode:o})")


def check_provider_keys(catalog: ProviderCatalog, env: Mapping[str, str] = os.environ) -> CheckResult:
    name = "provider credentials"
    providers = catalog.credentials()
    if not providers:
        return failed(name, "no model provider is configured or has a key in the environment")
    missing = [p.provider_id for p in providers if not _has_credentials(p, env)]
    if missing:
        return failed(name, f"no credentials for: {', '.join(sorted(missing))}")
    return passed(name, ", ".join(sorted(p.provider_id for p in providers)))


def _has_credentials(provider: ProviderCredential, env: Mapping[str, str]) -> bool:
    if provider.has_key:
        return True
    if provider.api == "anthropic-bedrock":
        return bool(
            provider.options.get("aws_access_key") or env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_PROFILE")
        )
    if provider.api == "anthropic-vertex":
        return bool(env.get("GOOGLE_APPLICATION_CREDENTIALS"))
    if provider.api in _KEYED_APIS:
        # A model server on this machine (Ollama, vLLM, LM Studio) needs no key.
        return provider.base_url is not None and is_loopback(urlsplit(provider.base_url).hostname or "")
    return True


def check_database_kind(dialect: str, auth_configured: bool) -> CheckResult:
    name = "database isolation"
    if dialect == "postgresql":
        return passed(name, "Postgres: tenants isolated by row-level security")
    if auth_configured:
        return warned(name, "SQLite: tenants are separated by queries only; use Postgres for several tenants")
    return skipped(name, "SQLite in local mode (one tenant)")


def check_owner_url(dialect: str, owner_url: str | None) -> CheckResult:
    name = "owner role configured"
    if dialect != "postgresql":
        return skipped(name, "SQLite has no roles")
    if owner_url:
        return passed(name, "database.owner_url set: migrations, start-up recovery and audit verify use it")
    return warned(
        name,
        "database.owner_url is not set: a runtime role bound by row-level security cannot see other "
        "tenants' interrupted turns at start-up, nor verify their audit chains",
    )


def check_config_keys(config: Config) -> CheckResult:
    """A key nobody reads is most likely a typo of one that matters (`permision`)."""
    unknown = unknown_keys(config)
    if unknown:
        return failed("config keys", "; ".join(key.describe() for key in unknown))
    return passed("config keys", "every key is known")
