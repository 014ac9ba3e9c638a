"""Loading plugins: from installed packages (entry points) and from the config's `plugin` list.

Config entries are either a path to a `.py` file (absolute, `~/...`, or relative: looked up next to the
config files, highest precedence first, then in the workspace) or a dotted module name that is imported.
Loading imports code, so it blocks: call it at start-up, off the event loop
(`await asyncio.to_thread(create_plugin_manager, settings)`). Any failure is a `PluginLoadError` naming
the plugin: a server must not start with half its plugins.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from agentforge.config import Config, ConfigError, Settings
from agentforge.plugins.errors import PluginLoadError
from agentforge.plugins.manager import PluginManager
from agentforge.tools.execute import describe_exception

ENTRY_POINT_GROUP = "agentforge.plugins"
CONFIG_KEY = "plugin"
_NOT_IDENTIFIER = re.compile(r"\W")


def create_plugin_manager(settings: Settings, *, entry_points: bool = True) -> PluginManager:
    """The built-in plugin, then installed plugins, then the config's `plugin` list, in that order."""
    plugins = PluginManager()
    if entry_points:
        load_entry_points(plugins)
    load_configured(plugins, configured_specs(settings.config), search_dirs=search_dirs(settings))
    return plugins


def configured_specs(config: Config) -> list[str]:
    """The config's `plugin` entries (a single string is accepted as a one-item list)."""
    raw = (config.model_extra or {}).get(CONFIG_KEY, [])
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(item, str) and item.strip() for item in raw):
        raise ConfigError(f"`{CONFIG_KEY}` must be a list of .py file paths or module names, got {raw!r}")
    return [item.strip() for item in raw]


def search_dirs(settings: Settings) -> list[Path]:
    """Where relative plugin paths are looked up: config file directories (highest precedence first),
    then the workspace."""
    candidates = [source.parent for source in reversed(settings.config_sources)] + [settings.directory]
    unique: list[Path] = []
    for directory in candidates:
        if directory not in unique:
            unique.append(directory)
    return unique


def load_entry_points(plugins: PluginManager, *, group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Register every object installed packages advertise in the entry point `group`; returns names."""
    names: list[str] = []
    for entry_point in importlib.metadata.entry_points(group=group):
        source = f"entry point {entry_point.value!r}"
        if entry_point.dist is not None:
            source += f" of package {entry_point.dist.name!r}"
        try:
            plugin = entry_point.load()
        except Exception as exc:
            raise PluginLoadError(
                entry_point.name, f"{source} failed to import: {describe_exception(exc)}"
            ) from exc
        names.append(plugins.register(plugin, name=entry_point.name))
    return names


def load_configured(
    plugins: PluginManager, specs: Sequence[str], *, search_dirs: Sequence[Path]
) -> list[str]:
    """Import and register each config entry, in order; returns the names they are registered under."""
    return [plugins.register(import_plugin(spec, search_dirs=search_dirs), name=spec) for spec in specs]


def import_plugin(spec: str, *, search_dirs: Sequence[Path]) -> ModuleType:
    """The module a config entry names: a `.py` file or a dotted module name."""
    if _looks_like_path(spec):
        return import_plugin_file(spec, _locate(spec, search_dirs))
    if not all(part.isidentifier() for part in spec.split(".")):
        raise PluginLoadError(spec, "expected a path to a .py file or a dotted module name")
    return _import_module(spec)


def import_plugin_file(spec: str, path: Path) -> ModuleType:
    """Import a plugin file under a module name unique to its path (importing it again reuses it)."""
    if path.suffix != ".py":
        raise PluginLoadError(spec, f"{path} is not a .py file")
    name = _module_name(path)
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise PluginLoadError(spec, f"cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running, as a normal import would: dataclasses and pickling look modules up.
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if not isinstance(exc, Exception):
            raise
        raise PluginLoadError(spec, f"importing {path} raised {describe_exception(exc)}") from exc
    return module


def _import_module(spec: str) -> ModuleType:
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (spec == exc.name or spec.startswith(exc.name + ".")):
            raise PluginLoadError(
                spec, f"no module named {exc.name!r} is installed in the server's environment"
            ) from exc
        raise PluginLoadError(spec, f"importing it raised {describe_exception(exc)}") from exc
    except Exception as exc:
        raise PluginLoadError(spec, f"importing it raised {describe_exception(exc)}") from exc


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".py") or spec.startswith((".", "~", "/")) or "/" in spec or "\\" in spec


def _locate(spec: str, search_dirs: Sequence[Path]) -> Path:
    path = Path(spec).expanduser()
    if path.is_absolute():
        if path.is_file():
            return path
        raise PluginLoadError(spec, f"file {path} not found")
    candidates = [(directory / path).resolve() for directory in search_dirs]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(candidate) for candidate in candidates) or "no directory to look in"
    raise PluginLoadError(spec, f"file not found (looked for {looked})")


def _module_name(path: Path) -> str:
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    return f"agentforge_plugin_{_NOT_IDENTIFIER.sub('_', resolved.stem)}_{digest}"
