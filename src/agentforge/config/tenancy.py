"""The `tenancy` section and what a tenant's overlay may set (see the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentforge.config.errors import ConfigError
from agentforge.identity.model import InvalidTenantId, validate_tenant_id

TENANT_PLACEHOLDER = "{tenant}"
ALL_TENANTS = "*"
# Settings of the process, not of a tenant: one server, one database, one identity setup, one set of
# in-process plugins, one permission deadline timer.
SERVER_WIDE_KEYS = frozenset(
    {
        "server",
        "database",
        "auth",
        "tenancy",
        "plugin",
        "permission_timeout",
        "permission_default",
        "question_timeout",
        "sandbox",
        "audit",
        "webhook_delivery",
    }
)
# Server-wide keys inside sections a tenant may otherwise set: (section, key).
SERVER_WIDE_NESTED_KEYS = frozenset({("tools", "inherit_env")})


def _server_wide_in(overlay: Mapping[str, Any]) -> list[str]:
    refused = sorted(SERVER_WIDE_KEYS.intersection(overlay))
    for section, key in sorted(SERVER_WIDE_NESTED_KEYS):
        value = overlay.get(section)
        if isinstance(value, Mapping) and key in value:
            refused.append(f"{section}.{key}")
    return refused


def check_overlay(overlay: Mapping[str, Any], *, where: str) -> None:
    """Refuse the keys a tenant overlay may not set (ConfigError naming them and `where` they are)."""
    refused = _server_wide_in(overlay)
    if refused:
        raise ConfigError(
            f"{where}: {', '.join(refused)} cannot be set per tenant (server-wide: "
            f"{', '.join(sorted(SERVER_WIDE_KEYS))})"
        )


def granted(grant: list[str] | str, tenant_id: str) -> bool:
    """Whether a grant (a list of tenant ids, or "*") covers `tenant_id`."""
    grantees = [grant] if isinstance(grant, str) else grant
    return ALL_TENANTS in grantees or tenant_id in grantees


def check_grantees(value: list[str] | str) -> list[str] | str:
    """A grant's tenant ids must be valid ("*" stands for all)."""
    if isinstance(value, list):
        for tenant_id in value:
            if tenant_id == ALL_TENANTS:
                continue
            try:
                validate_tenant_id(tenant_id)
            except InvalidTenantId as exc:
                raise ValueError(str(exc)) from None
    return value


class TenancyConfig(BaseModel):
    # Unlike other sections, unknown keys are refused: a mistyped key here would silently put every
    # tenant in the wrong place.
    model_config = ConfigDict(extra="forbid")

    workspace_root: str | None = None
    overlays: dict[str, dict[str, Any]] = Field(default_factory=dict)
    external_directories: dict[str, list[str]] = Field(default_factory=dict)
    # Tenants whose commands may run at all (bash tool, shell route, command snippets), or "*" for
    # every tenant. Confined tenants get none by default. Granted, their commands run only inside
    # the OS sandbox (config/sandbox.py): without a working one they are refused, unless
    # `sandbox.mode` is "off" (the operator's own sandbox around the server).
    shell: list[str] | Literal["*"] = Field(default_factory=list)

    @field_validator("workspace_root")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_absolute():
            raise ValueError(f"must be an absolute path, got {value!r}")
        return value

    @field_validator("external_directories")
    @classmethod
    def _absolute_directories(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for tenant_id, directories in value.items():
            try:
                validate_tenant_id(tenant_id)
            except InvalidTenantId as exc:
                raise ValueError(str(exc)) from None
            relative = [d for d in directories if not Path(d).expanduser().is_absolute()]
            if relative:
                raise ValueError(f"{tenant_id}: directories must be absolute paths, got {relative}")
        return value

    @field_validator("shell")
    @classmethod
    def _granted_tenants(cls, value: list[str] | str) -> list[str] | str:
        return check_grantees(value)

    def shell_granted(self, tenant_id: str) -> bool:
        """Whether the server config lets this (confined) tenant run commands."""
        return granted(self.shell, tenant_id)

    def shell_grantees(self) -> list[str]:
        return [self.shell] if isinstance(self.shell, str) else list(self.shell)

    def external_directories_for(self, tenant_id: str) -> list[Path]:
        return [Path(d).expanduser() for d in self.external_directories.get(tenant_id, [])]

    @field_validator("overlays")
    @classmethod
    def _tenant_overlays(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for tenant_id, overlay in value.items():
            try:
                validate_tenant_id(tenant_id)
                check_overlay(overlay, where=tenant_id)
            except (InvalidTenantId, ConfigError) as exc:
                raise ValueError(str(exc)) from None
        return value

    def workspace_for(self, tenant_id: str, data_dir: Path) -> Path:
        """The workspace root of a tenant other than `default`."""
        if self.workspace_root is None:
            return data_dir / "tenants" / tenant_id / "workspace"
        root = Path(self.workspace_root).expanduser()
        if TENANT_PLACEHOLDER in self.workspace_root:
            return Path(str(root).replace(TENANT_PLACEHOLDER, tenant_id))
        return root / tenant_id
