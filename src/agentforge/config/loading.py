"""Finding, reading, substituting, merging and validating config files into the server's Settings."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import ValidationError

from agentforge.config.errors import ConfigError
from agentforge.config.sections import Config
from agentforge.config.tenancy import check_overlay

APP_NAME = "agentforge"
CONFIG_FILENAME = "agentforge.json"
ENV_CONFIG = "AGENTFORGE_CONFIG"
ENV_DATA_DIR = "AGENTFORGE_DATA_DIR"
ENV_DATABASE_URL = "AGENTFORGE_DATABASE_URL"
ENV_DATABASE_OWNER_URL = "AGENTFORGE_DATABASE_OWNER_URL"
ENV_HOST = "AGENTFORGE_HOST"
ENV_PORT = "AGENTFORGE_PORT"

_SUBSTITUTION = re.compile(r"\{(env|file):([^}]*)\}")


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
    """The config files to merge, lowest precedence first: the user's, the project's (from the
    repository root down to `directory`), `AGENTFORGE_CONFIG`, `config_path`. Optional ones are
    listed only if they exist; a file named explicitly or by `AGENTFORGE_CONFIG` must exist."""
    env = os.environ if env is None else env
    candidates = [user_config_file(), *project_config_candidates(directory or Path.cwd())]
    files = [p for p in candidates if p.is_file()]
    named = [Path(env[ENV_CONFIG]) if env.get(ENV_CONFIG) else None, config_path]
    for path in (p.expanduser() for p in named if p is not None):
        if not path.is_file():
            raise ConfigError("config file not found", path=path)
        files.append(path)
    return _unique(files)


def project_config_candidates(directory: Path) -> list[Path]:
    """`agentforge.json` in the directory and each parent up to the repository's root (the nearest
    one holding `.git`), outermost first so the nearest file wins. Outside a repository: only the
    directory itself (a file in some parent of an unrelated directory must not apply)."""
    folders = [directory.resolve(), *directory.resolve().parents]
    root = next((i for i, folder in enumerate(folders) if (folder / ".git").exists()), 0)
    chain = folders[: root + 1]
    return [folder / CONFIG_FILENAME for folder in reversed(chain)]


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
    package docstring."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read tenant overlay: {exc.strerror or exc}", path=path) from exc
    raw = _json_object(text, path, what="a tenant overlay")
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
    raw = _json_object(text, path, what="the config")
    substituted: dict[str, Any] = _substitute(raw, base_dir=path.parent, env=env, path=path)
    _validate(substituted, path=path)  # so a schema error names the file it is in
    return substituted


def _json_object(text: str, path: Path, *, what: str) -> dict[str, Any]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ConfigError(f"invalid JSON at {where}: {exc.msg}", path=path) from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} must be a JSON object", path=path)
    return raw


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
