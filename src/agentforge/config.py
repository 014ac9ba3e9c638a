"""Configuration: the JSON config file (discovery, merge, substitution) and the settings the server runs with.

Config files are merged, later winning (deep merge of objects): the user config dir's
`agentforge.json`, then `./agentforge.json` in the working directory, then the file named by
`AGENTFORGE_CONFIG`, then an explicit path (`--config`). String values may contain `{env:NAME}`
(missing variable → "") and `{file:path}` (relative to the config file, `~` expanded, stripped).

Loading happens once at start-up, before the event loop serves anything, so plain file IO is fine here.

Tenancy (the optional `tenancy` section) gives each tenant its own workspace and config:

    "tenancy": {
      "workspace_root": "/srv/forge/{tenant}/workspace",
      "overlays": {"acme": {"model": "anthropic/claude-sonnet-4", "agent": {...}, "mcp": {...}}}
    }

- `workspace_root` (absolute, `~` expanded): where a tenant's tools work. `{tenant}` is replaced by the
  tenant id; without it each tenant gets `<workspace_root>/<tenant>`. Unset: `<data_dir>/tenants/<tenant>/
  workspace`. The tenant `default` (local mode) always works in the server's own directory.
- `overlays`: per tenant id, a partial config deep-merged over this one for that tenant only. Keys that
  configure the process rather than a tenant (`SERVER_WIDE_KEYS`) are refused.
- `<data_dir>/tenants/<tenant>/agentforge.json`, when it exists, is merged over that tenant's overlay
  when the tenant is first served. It is read as is: no `{env:}`/`{file:}` substitution, so a tenant
  overlay can never pull the server's environment or files into a tenant's config.
- `external_directories`: per tenant id, absolute directories outside its workspace that its tools may
  still reach (after the usual `external_directory` permission ask). Every other path outside a
  tenant's workspace is refused outright: a tenant's own user cannot approve their way out of it.

The processes a tenant's tools start (bash, the shell route, command snippets, MCP stdio servers) get
a clean environment (tools/confinement.py): the server's secrets never reach them. `shell_env`
(`{NAME: value}`, settable per tenant) adds variables to it. The tenant `default` inherits the server's
environment unless `tools.inherit_env` is false (server-wide).

Authentication (section `auth`, see `AuthConfig`) is ON, meaning every request must carry valid
credentials, when any of these holds:
- `auth.required` is true;
- `auth.jwt` is set (JWT bearer tokens);
- `auth.gateway` is set (signed identity headers from a trusted gateway);
- `auth.api_keys` is explicitly true and the server binds a non-loopback address.
Otherwise the server runs in local mode: requests without credentials run as the local user of tenant
`default`. Credentials that are presented are verified in every mode (a bad key is a 401 even in local
mode). `agentforge serve` refuses a non-loopback bind while authentication is off.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentforge.identity.model import InvalidTenantId, validate_tenant_id

APP_NAME = "agentforge"
CONFIG_FILENAME = "agentforge.json"
ENV_CONFIG = "AGENTFORGE_CONFIG"
ENV_DATA_DIR = "AGENTFORGE_DATA_DIR"
ENV_DATABASE_URL = "AGENTFORGE_DATABASE_URL"
ENV_DATABASE_OWNER_URL = "AGENTFORGE_DATABASE_OWNER_URL"
ENV_HOST = "AGENTFORGE_HOST"
ENV_PORT = "AGENTFORGE_PORT"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4096

_SUBSTITUTION = re.compile(r"\{(env|file):([^}]*)\}")

TENANT_PLACEHOLDER = "{tenant}"
# Settings of the process, not of a tenant: one server, one database, one identity setup, one set of
# in-process plugins, one permission deadline timer.
SERVER_WIDE_KEYS = frozenset(
    {"server", "database", "auth", "tenancy", "plugin", "permission_timeout", "permission_default"}
)
# Server-wide keys inside sections a tenant may otherwise set: (section, key).
SERVER_WIDE_NESTED_KEYS = frozenset({("tools", "inherit_env")})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(Exception):
    """A config file (or override) is unreadable, not JSON, or does not match the schema."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = path


class _Section(BaseModel):
    # Keys we do not know yet are kept: later features read them.
    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)


class ModelLimit(_Section):
    context: int | None = Field(default=None, ge=0)
    output: int | None = Field(default=None, ge=0)
    input: int | None = Field(default=None, ge=0)


class ModelCostTier(_Section):
    """USD per 1M tokens for requests whose prompt exceeds 200K tokens; unset fields keep the base price."""

    input: float | None = Field(default=None, ge=0)
    output: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class ModelCost(ModelCostTier):
    """USD per 1M tokens; `context_over_200k` overrides (field by field) the long-prompt tier."""

    context_over_200k: ModelCostTier | None = None


class ModelConfig(_Section):
    id: str | None = None  # the id sent to the provider, when it differs from the key
    name: str | None = None
    limit: ModelLimit | None = None
    cost: ModelCost | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    # Named option sets a prompt or an agent selects with `variant` (e.g. {"high": {"reasoning_effort":
    # "high"}}), merged over `options` (KERNEL 5.6).
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ProviderOptions(_Section):
    base_url: str | None = Field(default=None, alias="baseURL")
    api_key: str | None = Field(default=None, alias="apiKey")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0)  # seconds
    # Seconds without a streamed chunk before the attempt fails as stalled (retryable); default 120.
    chunk_timeout: float | None = Field(default=None, gt=0, alias="chunkTimeout")


class ProviderConfig(_Section):
    api: str = "openai"
    name: str | None = None
    options: ProviderOptions = Field(default_factory=ProviderOptions)
    models: dict[str, ModelConfig] = Field(default_factory=dict)


class ToolOutputConfig(_Section):
    max_lines: int = Field(default=2000, gt=0)
    max_bytes: int = Field(default=51200, gt=0)


class RetryConfig(_Section):
    max_attempts: int = Field(default=5, ge=1)


class ServerConfig(_Section):
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)


class ToolsConfig(_Section):
    # Whether the default tenant's tool processes inherit the server's environment (local mode: the
    # user's own machine). Other tenants never do. Server-wide.
    inherit_env: bool = True


def _check_env_names(value: dict[str, str]) -> dict[str, str]:
    bad = sorted(name for name in value if not _ENV_NAME.match(name))
    if bad:
        raise ValueError(f"not valid environment variable names: {', '.join(bad)}")
    return value


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


class TenancyConfig(BaseModel):
    # Unlike other sections, unknown keys are refused: a mistyped key here would silently put every
    # tenant in the wrong place.
    model_config = ConfigDict(extra="forbid")

    workspace_root: str | None = None
    overlays: dict[str, dict[str, Any]] = Field(default_factory=dict)
    external_directories: dict[str, list[str]] = Field(default_factory=dict)

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


# --- auth ---------------------------------------------------------------------------------------------

# HMAC keys shorter than the hash output weaken HS256 and the gateway signature (RFC 7518 3.2).
MIN_SECRET_LENGTH = 32


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        # A host name other than localhost may resolve anywhere: not provably loopback.
        return False


def _strong_secret(value: str | None, where: str) -> str | None:
    if value is not None and len(value) < MIN_SECRET_LENGTH:
        raise ValueError(
            f"{where} must be at least {MIN_SECRET_LENGTH} characters"
            " (empty? check the {env:...} or {file:...} it comes from)"
        )
    return value


JwtAlgorithm = Literal["HS256", "RS256"]
_HS256_ONLY: list[JwtAlgorithm] = ["HS256"]


class _AuthSection(BaseModel):
    # Security settings: a misspelt key must fail loudly instead of silently turning a check off.
    model_config = ConfigDict(extra="forbid")


class JwtConfig(_AuthSection):
    """Bearer JWTs: signature (HS256 with `secret`, RS256 with `public_key` PEM or `jwks_url`), `iss`,
    `aud` and `exp` are checked; tenant, user and roles come from the named claims."""

    issuer: str = Field(min_length=1)
    audience: str = Field(min_length=1)
    algorithms: list[JwtAlgorithm] = Field(default_factory=lambda: _HS256_ONLY.copy(), min_length=1)
    secret: str | None = None
    public_key: str | None = None
    jwks_url: str | None = None
    jwks_ttl_seconds: float = Field(default=300.0, gt=0)
    tenant_claim: str = Field(default="tenant", min_length=1)
    user_claim: str = Field(default="sub", min_length=1)
    roles_claim: str = Field(default="roles", min_length=1)
    leeway: float = Field(default=0.0, ge=0, le=300)  # seconds of clock skew tolerated on exp/nbf/iat

    @field_validator("secret")
    @classmethod
    def _secret_is_strong(cls, value: str | None) -> str | None:
        return _strong_secret(value, "auth.jwt.secret")

    @model_validator(mode="after")
    def _one_key_matching_the_algorithms(self) -> Self:
        sources = [name for name in ("secret", "public_key", "jwks_url") if getattr(self, name)]
        if len(sources) != 1:
            raise ValueError("auth.jwt needs exactly one of secret, public_key or jwks_url")
        # One key family only: mixing them would allow algorithm-confusion forgeries.
        wanted = "HS256" if sources[0] == "secret" else "RS256"
        if set(self.algorithms) != {wanted}:
            raise ValueError(
                f"auth.jwt.{sources[0]} verifies {wanted} tokens: set algorithms to [{wanted!r}]"
            )
        if self.public_key is not None:
            _check_rsa_public_key(self.public_key)
        if self.jwks_url is not None and not self.jwks_url.startswith(("https://", "http://")):
            raise ValueError("auth.jwt.jwks_url must be an http(s) URL")
        return self


def _check_rsa_public_key(pem: str) -> None:
    # Imported here: only a config with an RSA public key pays for loading the crypto backend.
    from jwt.algorithms import RSAAlgorithm
    from jwt.exceptions import PyJWTError

    try:
        RSAAlgorithm(RSAAlgorithm.SHA256).prepare_key(pem)
    except (PyJWTError, ValueError, TypeError):
        raise ValueError("auth.jwt.public_key is not an RSA public key in PEM form") from None


class GatewayConfig(_AuthSection):
    """A trusted gateway that authenticates users itself and forwards identity headers signed with
    HMAC-SHA256 over `secret` (see identity/gateway.py for the canonical string)."""

    secret: str
    max_skew_seconds: int = Field(default=300, ge=1, le=3600)
    # Peers allowed to send identity headers (CIDRs or single addresses); empty = any peer with the key.
    trusted_addresses: list[str] = Field(default_factory=list)
    # Nonces remembered for the replay window; a gateway sending more than this per window is refused.
    max_nonces: int = Field(default=100_000, ge=1)

    @field_validator("secret")
    @classmethod
    def _secret_is_strong(cls, value: str) -> str:
        checked = _strong_secret(value, "auth.gateway.secret")
        assert checked is not None
        return checked

    @field_validator("trusted_addresses")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"not an IP address or CIDR network: {value!r}") from None
        return values


class AuthConfig(_AuthSection):
    """Who may call the server; what turns authentication on is described in this module's docstring."""

    # None: API keys are accepted whenever presented, but do not by themselves turn auth on for a
    # loopback bind; false: API keys are refused; true: also turns auth on for a non-loopback bind.
    api_keys: bool | None = None
    required: bool = False
    jwt: JwtConfig | None = None
    gateway: GatewayConfig | None = None

    def enabled(self, host: str) -> bool:
        """Whether requests to a server bound to `host` must carry credentials."""
        if self.required or self.jwt is not None or self.gateway is not None:
            return True
        return self.api_keys is True and not is_loopback(host)

    @property
    def accepts_api_keys(self) -> bool:
        return self.api_keys is not False


class DatabaseConfig(_Section):
    """Where the store lives. `url`: what the server connects as (default: SQLite in the data dir).
    `owner_url` (Postgres): the role that owns the tables and runs the migrations, so the server
    itself can run as a role bound by row-level security (see store/privileges.py)."""

    url: str | None = None
    owner_url: str | None = None


class Config(_Section):
    """The merged config file. Unknown top-level keys (permission, agent, mcp, ...) are kept."""

    model: str | None = None
    small_model: str | None = None
    default_agent: str | None = None
    provider: dict[str, ProviderConfig] = Field(default_factory=dict)
    tool_output: ToolOutputConfig = Field(default_factory=ToolOutputConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    tenancy: TenancyConfig = Field(default_factory=TenancyConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    shell_env: dict[str, str] = Field(default_factory=dict)  # added to tool processes' environment

    @field_validator("shell_env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env_names(value)


@dataclass(slots=True)
class Settings:
    """What the server runs with."""

    config: Config
    data_dir: Path
    database_url: str
    host: str
    port: int
    directory: Path
    config_sources: tuple[Path, ...] = field(default=())  # files merged, lowest precedence first
    database_owner_url: str | None = None  # Postgres: migrations and maintenance run as this role


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """`overlay` over `base`: objects merge key by key, anything else (lists too) is replaced."""
    merged = dict(base)
    for key, value in overlay.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged


def user_config_file() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / CONFIG_FILENAME


def config_files(
    *, config_path: Path | None = None, directory: Path | None = None, env: Mapping[str, str] | None = None
) -> list[Path]:
    """The config files to merge, lowest precedence first. Optional ones are listed only if they exist;
    a file named explicitly or by `AGENTFORGE_CONFIG` must exist."""
    env = os.environ if env is None else env
    files = [p for p in (user_config_file(), (directory or Path.cwd()) / CONFIG_FILENAME) if p.is_file()]
    named = [Path(env[ENV_CONFIG]) if env.get(ENV_CONFIG) else None, config_path]
    for path in (p.expanduser() for p in named if p is not None):
        if not path.is_file():
            raise ConfigError("config file not found", path=path)
        files.append(path)
    return _unique(files)


def load_config(
    *,
    config_path: Path | None = None,
    directory: Path | None = None,
    env: Mapping[str, str] | None = None,
    override: Mapping[str, Any] | None = None,
) -> tuple[Config, list[Path]]:
    """Discover, read, substitute, validate and merge the config files; `override` is merged last."""
    env = os.environ if env is None else env
    sources = config_files(config_path=config_path, directory=directory, env=env)
    merged: dict[str, Any] = {}
    for path in sources:
        merged = deep_merge(merged, _read_config_file(path, env))
    if override:
        merged = deep_merge(merged, override)
    return _validate(merged, path=None), sources


def load_settings(
    *,
    config_path: Path | None = None,
    data_dir: Path | None = None,
    database_url: str | None = None,
    database_owner_url: str | None = None,
    host: str | None = None,
    port: int | None = None,
    directory: Path | None = None,
    config_override: dict[str, Any] | None = None,
) -> Settings:
    """Explicit arguments beat environment variables, which beat the config file, which beats defaults."""
    env = os.environ
    directory = (directory or Path.cwd()).resolve()
    config, sources = load_config(
        config_path=config_path, directory=directory, env=env, override=config_override
    )
    resolved_data_dir = data_dir or _env_path(env, ENV_DATA_DIR) or Path(platformdirs.user_data_dir(APP_NAME))
    return Settings(
        config=config,
        data_dir=resolved_data_dir,
        database_url=database_url
        or env.get(ENV_DATABASE_URL)
        or config.database.url
        or f"sqlite:///{resolved_data_dir / 'agentforge.db'}",
        database_owner_url=database_owner_url or env.get(ENV_DATABASE_OWNER_URL) or config.database.owner_url,
        host=host or env.get(ENV_HOST) or config.server.host,
        port=_pick_port(port, env, config),
        directory=directory,
        config_sources=tuple(sources),
    )


def tenant_config(base: Config, *overlays: tuple[Mapping[str, Any], str]) -> Config:
    """`base` with each `(overlay, where)` deep-merged over it in turn, validated; `where` names the
    overlay in errors. The `tenancy` section is left out: it is the server's, not the tenant's."""
    merged: dict[str, Any] = base.model_dump(exclude_unset=True, exclude={"tenancy"})
    for overlay, where in overlays:
        check_overlay(overlay, where=where)
        merged = deep_merge(merged, overlay)
    try:
        return Config.model_validate(merged)
    except ValidationError as exc:
        sources = ", ".join(where for _, where in overlays) or "config"
        raise ConfigError(f"{sources}: {_describe(exc)}") from exc


def read_overlay_file(path: Path) -> dict[str, Any] | None:
    """A tenant's overlay file, None when there is none. Blocking file IO. No substitution: see the
    module docstring."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read tenant overlay: {exc.strerror or exc}", path=path) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ConfigError(f"invalid JSON at {where}: {exc.msg}", path=path) from exc
    if not isinstance(raw, dict):
        raise ConfigError("a tenant overlay must be a JSON object", path=path)
    if _SUBSTITUTION.search(text):
        raise ConfigError(
            "{env:...} and {file:...} are not allowed in a tenant overlay file; "
            "put such values in the server config's tenancy.overlays",
            path=path,
        )
    return raw


def _read_config_file(path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}", path=path) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ConfigError(f"invalid JSON at {where}: {exc.msg}", path=path) from exc
    if not isinstance(raw, dict):
        raise ConfigError("the config must be a JSON object", path=path)
    substituted: dict[str, Any] = _substitute(raw, base_dir=path.parent, env=env, path=path)
    _validate(substituted, path=path)  # so a schema error names the file it is in
    return substituted


def _substitute(value: Any, *, base_dir: Path, env: Mapping[str, str], path: Path) -> Any:
    """Replace `{env:NAME}` and `{file:path}` in every string value (keys are left alone)."""
    if isinstance(value, str):
        return _SUBSTITUTION.sub(lambda m: _substitution(m, base_dir=base_dir, env=env, path=path), value)
    if isinstance(value, dict):
        return {k: _substitute(v, base_dir=base_dir, env=env, path=path) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, base_dir=base_dir, env=env, path=path) for v in value]
    return value


def _substitution(match: re.Match[str], *, base_dir: Path, env: Mapping[str, str], path: Path) -> str:
    kind, argument = match.group(1), match.group(2).strip()
    if kind == "env":
        return env.get(argument, "")
    target = Path(argument).expanduser()
    if not target.is_absolute():
        target = base_dir / target
    try:
        return target.read_text(encoding="utf-8").strip()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"{{file:{argument}}}: cannot read {target}: {reason}", path=path) from exc


def _validate(raw: Mapping[str, Any], *, path: Path | None) -> Config:
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        where = "" if path is not None else "config override: "
        raise ConfigError(where + _describe(exc), path=path) from exc


def _describe(exc: ValidationError) -> str:
    # Our own validators' messages are complete sentences: drop pydantic's "Value error, " before them.
    problems = [
        f"{_location(error['loc'])}: {error['msg'].removeprefix('Value error, ')}" for error in exc.errors()
    ]
    return "invalid config: " + "; ".join(problems)


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "<root>"


def _env_path(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name)
    return Path(value).expanduser() if value else None


def _pick_port(explicit: int | None, env: Mapping[str, str], config: Config) -> int:
    if explicit is not None:
        return explicit
    from_env = _env_port(env)
    return from_env if from_env is not None else config.server.port


def _env_port(env: Mapping[str, str]) -> int | None:
    value = env.get(ENV_PORT)
    if not value:
        return None
    try:
        port = int(value)
    except ValueError:
        raise ConfigError(f"{ENV_PORT} must be a port number, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{ENV_PORT} must be between 0 and 65535, got {port}")
    return port


def _unique(paths: list[Path]) -> list[Path]:
    """Drop repeats (the same file found twice), keeping the last: it has the higher precedence."""
    seen: set[Path] = set()
    unique: list[Path] = []
    for path in reversed(paths):
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique[::-1]
