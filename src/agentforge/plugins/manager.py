"""The plugin manager: registers plugins (the built-in one first) and calls their hooks.

pluggy finds and validates the hook implementations; the manager calls them itself so that every
implementation runs to completion, awaited if it is a coroutine, before the next one starts (pluggy's
own call would run all synchronous parts first). Order: `tryfirst` implementations, then the others,
then `trylast` ones, each group in registration order, so the plugin registered last has the last word.

Where the session layer calls each hook (`plugins` is the runtime's `PluginManager`; `calls` is
`agentforge.plugins.calls`, the typed calling side of every hook):

  hook                   call site                              the call
  ---------------------  -------------------------------------  --------------------------------------
  register_tools         Runtime.open                           tools=ToolRegistry.from_plugins(plugins)
  event                  Runtime.open, once                     bus.listen(plugins.observe_event)
  chat_message           SessionService.create_user_message,    hooked = await calls.user_message(
                         after resolve_parts, before the          plugins, session_id=, agent=agent.name,
                         message and parts are submitted          model=model, message=info, parts=parts)
                                                                then save hooked.message, hooked.parts
  messages_transform     TurnLoop._step, on `history` before    history = await calls.history(
                         _request converts it                     plugins, session_id=, messages=history)
  system_transform,      TurnLoop._step, right after _request   await calls.model_request(plugins,
  chat_params,           built the ModelRequest                   request, session_id=, agent=agent.name,
  chat_headers                                                    model=model)   # edits request in place
  tool_definition        where the step's tool specs are built  request.tools = await calls.tool_specs(
                         (TurnTools.specs)                        plugins, <the step's tools but invalid>)
  tool_execute_before,   ToolCallRunner._execute                calls.run_tool_with_hooks(plugins, tool,
  tool_execute_after                                              tool_input, ctx, limits=) in place of
                                                                  run_tool(tool, tool_input, ctx, ...)
  permission_ask         PermissionService.ask, when the rules  status = await calls.permission_status(
                         evaluate to "ask", before the request    plugins, request, session_id)
                         is stored and published                "allow": return; "deny": raise
                                                                PermissionDeniedError; "ask": go on
  shell_env              bash tool (and the user shell route),  env = await ctx.process_env(cwd), with
                         before spawning the process              ToolServices.shell_env =
                                                                  calls.shell_env_hook(plugins) (the
                                                                  shell route and command snippets
                                                                  call calls.shell_env(plugins, ...))

Building the manager: `plugins = await asyncio.to_thread(loader.create_plugin_manager, settings)` (it imports
plugin modules, so off the event loop).

Errors: an exception in the observer hook `event` is logged and skipped. In every other hook it
propagates to the caller unchanged, with a note naming the plugin; `calls.run_tool_with_hooks` turns one
that is not already a `ToolError` into a `ToolError` so the model sees it and the turn goes on.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

import pluggy
from pluggy import HookImpl, PluginValidationError

from agentforge.model.events import Event
from agentforge.plugins import hookspecs
from agentforge.plugins.errors import PluginError, PluginLoadError
from agentforge.tools.base import Tool

log = logging.getLogger(__name__)

BUILTIN_PLUGIN = "agentforge.builtin"
# Hooks whose failures must never reach the caller: they only watch.
OBSERVER_HOOKS = frozenset({"event"})
_TOOL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class PluginManager:
    """Plugins of one server, and the calls into their hooks."""

    def __init__(self, *, builtin: bool = True) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._spec_args = _spec_arguments(self._pm)
        self._order: dict[str, int] = {}
        self._ordered_cache: dict[str, list[HookImpl]] = {}
        if builtin:
            self._register_builtin()

    def _register_builtin(self) -> None:
        # Imported here: the built-in plugin pulls in every built-in tool, and tool modules may import
        # `agentforge.plugins.calls` without creating an import cycle.
        from agentforge.plugins import builtin

        self.register(builtin, name=BUILTIN_PLUGIN)

    # Registration

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a module or object holding `@hookimpl` functions; returns the name it is known by.

        Registering the same object again returns its existing name. Raises `PluginLoadError` when the
        plugin implements no hook, an unknown hook, a hook with arguments the spec does not have, or a
        pluggy wrapper (not supported: hooks here may be coroutines).
        """
        existing = self._pm.get_name(plugin)
        if existing is not None:
            return existing
        name = name or _default_name(plugin)
        if self._pm.has_plugin(name):
            raise PluginLoadError(name, "another plugin is already registered under this name")
        try:
            self._pm.register(plugin, name=name)
        except PluginValidationError as exc:
            # pluggy's first line repeats the plugin's name; the rest says what is wrong and where.
            raise PluginLoadError(name, "; ".join(str(exc).splitlines()[1:]) or str(exc)) from exc
        try:
            self._check_registered(plugin, name)
        except PluginLoadError:
            self._pm.unregister(plugin)
            raise
        self._order[name] = len(self._order)
        self._ordered_cache.clear()
        return name

    def _check_registered(self, plugin: object, name: str) -> None:
        callers = self._pm.get_hookcallers(plugin) or []
        if not callers:
            raise PluginLoadError(name, "it defines no hook implementations (functions marked @hookimpl)")
        for caller in callers:
            if not caller.has_spec():
                known = ", ".join(sorted(self._spec_args))
                raise PluginLoadError(name, f"unknown hook {caller.name!r} (hooks: {known})")
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and (impl.wrapper or impl.hookwrapper):
                    raise PluginLoadError(
                        name, f"hook {caller.name!r} is a wrapper; wrappers are not supported"
                    )

    def plugin_names(self) -> list[str]:
        """Registered plugins, in registration order."""
        return sorted(self._order, key=self._order.__getitem__)

    # Calling hooks

    def call(self, hook: str, /, **kwargs: Any) -> list[Any]:
        """Call a hook whose implementations are synchronous; returns their non-None results in order.

        An implementation returning an awaitable here is a plugin bug: `PluginError` (logged and skipped
        for observer hooks).
        """
        results: list[Any] = []
        for impl in self._implementations(hook, kwargs):
            try:
                result = _invoke(impl, kwargs)
                if inspect.isawaitable(result):
                    _discard(result)
                    raise PluginError(
                        f"Plugin {impl.plugin_name!r} implements {hook!r} as a coroutine, "
                        "but this hook is called synchronously"
                    )
            except Exception as exc:
                self._handle_failure(hook, impl, exc)
                continue
            if result is not None:
                results.append(result)
        return results

    async def acall(self, hook: str, /, **kwargs: Any) -> list[Any]:
        """Call a hook's implementations one at a time, awaiting each one that returns an awaitable;
        returns their non-None results in order."""
        results: list[Any] = []
        for impl in self._implementations(hook, kwargs):
            try:
                result = _invoke(impl, kwargs)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:
                self._handle_failure(hook, impl, exc)
                continue
            if result is not None:
                results.append(result)
        return results

    def implements(self, hook: str) -> bool:
        """Whether any plugin implements `hook` (callers skip preparing its output when none does)."""
        return bool(self._ordered(hook))

    def observe_event(self, event: Event) -> None:
        """A bus listener: hands every event to the `event` hook; never raises."""
        if self._ordered("event"):
            self.call("event", event=event)

    def tools(self) -> list[Tool[Any]]:
        """Tools of every plugin (built-ins first); a later tool with the same id replaces an earlier
        one in its position."""
        chosen: dict[str, Tool[Any]] = {}
        for impl in self._implementations("register_tools", {}):
            try:
                provided = _invoke(impl, {})
            except Exception as exc:
                _name_culprit(exc, impl, "register_tools")
                raise
            for tool in _checked_tools(impl.plugin_name, provided):
                chosen[tool.id] = tool
        return list(chosen.values())

    def _implementations(self, hook: str, kwargs: Mapping[str, Any]) -> list[HookImpl]:
        ordered = self._ordered(hook)
        expected = self._spec_args[hook]
        if set(kwargs) != expected:
            missing = sorted(expected - set(kwargs))
            unknown = sorted(set(kwargs) - expected)
            raise TypeError(f"Hook {hook!r} called with missing {missing} / unknown {unknown} arguments")
        return ordered

    def _ordered(self, hook: str) -> list[HookImpl]:
        cached = self._ordered_cache.get(hook)
        if cached is None:
            if hook not in self._spec_args:
                raise ValueError(f"Unknown hook {hook!r}; hooks: {', '.join(sorted(self._spec_args))}")
            caller = getattr(self._pm.hook, hook)
            cached = sorted(caller.get_hookimpls(), key=self._position)
            self._ordered_cache[hook] = cached
        return cached

    def _position(self, impl: HookImpl) -> tuple[int, int]:
        group = 0 if impl.tryfirst else 2 if impl.trylast else 1
        return group, self._order[impl.plugin_name]

    def _handle_failure(self, hook: str, impl: HookImpl, exc: Exception) -> None:
        if hook in OBSERVER_HOOKS:
            log.exception("Plugin %r failed in hook %r; skipped", impl.plugin_name, hook)
            return
        _name_culprit(exc, impl, hook)
        raise exc


def _spec_arguments(pm: pluggy.PluginManager) -> dict[str, frozenset[str]]:
    return {
        name: frozenset(caller.spec.argnames)
        for name, caller in vars(pm.hook).items()
        if isinstance(caller, pluggy.HookCaller) and caller.spec is not None
    }


def _name_culprit(exc: Exception, impl: HookImpl, hook: str) -> None:
    exc.add_note(f"raised by plugin {impl.plugin_name!r} in hook {hook!r}")


def _invoke(impl: HookImpl, kwargs: Mapping[str, Any]) -> Any:
    # pluggy's convention: an implementation receives only the arguments it names.
    return impl.function(*[kwargs[name] for name in impl.argnames])


def _discard(awaitable: Any) -> None:
    """Close a coroutine nobody will await, so Python does not warn that it was never awaited."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()


def _default_name(plugin: object) -> str:
    if isinstance(plugin, ModuleType):
        return plugin.__name__
    kind = type(plugin)
    return f"{kind.__module__}.{kind.__qualname__}"


def _checked_tools(plugin: str, provided: Any) -> Iterable[Tool[Any]]:
    if inspect.isawaitable(provided):
        _discard(provided)
        raise PluginError(f"Plugin {plugin!r}: register_tools must be synchronous")
    if not isinstance(provided, list | tuple):
        raise PluginError(f"Plugin {plugin!r}: register_tools must return a list of tools")
    for tool in provided:
        if not isinstance(tool, Tool):
            raise PluginError(f"Plugin {plugin!r}: register_tools returned {tool!r}, not a Tool instance")
        tool_id = getattr(tool, "id", None)
        if not isinstance(tool_id, str) or not _TOOL_ID.match(tool_id):
            raise PluginError(
                f"Plugin {plugin!r}: tool {type(tool).__name__} needs an `id` of 1-64 letters, digits, "
                f"'_' or '-' (got {tool_id!r})"
            )
        if not isinstance(getattr(tool, "description", None), str):
            raise PluginError(f"Plugin {plugin!r}: tool {tool_id!r} needs a `description` string")
    return provided
