"""Configuration: the JSON config file (discovery, merge, substitution) and the settings the server runs with.

Config files are merged, later winning (deep merge of objects): the user config dir's
`agentforge.json`, then `./agentforge.json` in the working directory, then the file named by
`AGENTFORGE_CONFIG`, then an explicit path (`--config`). String values may contain `{env:NAME}`
(missing variable → "") and `{file:path}` (relative to the config file, `~` expanded, stripped).

Loading happens once at start-up, before the event loop serves anything, so plain file IO is fine here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class ModelCost(_Section):
    """USD per 1M tokens."""

    input: float | None = Field(default=None, ge=0)
    output: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


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
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)


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
    problems = [f"{_location(error['loc'])}: {error['msg']}" for error in exc.errors()]
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
