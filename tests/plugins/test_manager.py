from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from agentforge.bus import Bus
from agentforge.model.events import Event
from agentforge.plugins import PluginError, PluginLoadError, PluginManager, ToolArgs, hookimpl
from agentforge.plugins.manager import BUILTIN_PLUGIN
from agentforge.tools.base import Tool, ToolContext, ToolResult
from agentforge.tools.builtin import builtin_tools
from agentforge.tools.registry import ToolRegistry


class Appender:
    """Appends its label to `output.args["seen"]`, synchronously or after yielding to the loop."""

    def __init__(self, label: str, *, asynchronous: bool = False) -> None:
        self.label = label
        self.asynchronous = asynchronous

    @hookimpl
    def tool_execute_before(self, output: ToolArgs) -> Any:
        if not self.asynchronous:
            output.args["seen"].append(self.label)
            return None
        return self._append_later(output)

    async def _append_later(self, output: ToolArgs) -> None:
        await asyncio.sleep(0)
        output.args["seen"].append(self.label)


class FirstAppender(Appender):
    @hookimpl(tryfirst=True)
    def tool_execute_before(self, output: ToolArgs) -> Any:
        return super().tool_execute_before(output)


class LastAppender(Appender):
    @hookimpl(trylast=True)
    def tool_execute_before(self, output: ToolArgs) -> Any:
        return super().tool_execute_before(output)


async def call_before(plugins: PluginManager) -> list[str]:
    output = ToolArgs(args={"seen": []})
    await plugins.acall("tool_execute_before", tool="bash", session_id="ses_1", call_id="c1", output=output)
    seen: list[str] = output.args["seen"]
    return seen


async def test_implementations_run_one_after_another_in_registration_order() -> None:
    plugins = PluginManager(builtin=False)
    plugins.register(Appender("a", asynchronous=True), name="a")
    plugins.register(Appender("b"), name="b")
    plugins.register(Appender("c", asynchronous=True), name="c")
    # The async "a" finishes before the sync "b" starts: each implementation completes in turn.
    assert await call_before(plugins) == ["a", "b", "c"]


async def test_tryfirst_and_trylast_move_an_implementation_to_the_front_or_back() -> None:
    plugins = PluginManager(builtin=False)
    plugins.register(LastAppender("last-1"), name="last-1")
    plugins.register(Appender("middle"), name="middle")
    plugins.register(FirstAppender("first-1"), name="first-1")
    plugins.register(LastAppender("last-2"), name="last-2")
    plugins.register(FirstAppender("first-2"), name="first-2")
    assert await call_before(plugins) == ["first-1", "first-2", "middle", "last-1", "last-2"]


async def test_acall_returns_results_of_sync_and_async_implementations_in_order() -> None:
    class Sync:
        @hookimpl
        def register_tools(self) -> list[Tool[Any]]:
            return []

    class Async:
        @hookimpl
        async def tool_definition(self, tool_id: str) -> str:
            await asyncio.sleep(0)
            return f"async saw {tool_id}"

    plugins = PluginManager(builtin=False)
    plugins.register(Sync())
    plugins.register(Async())
    assert await plugins.acall("register_tools") == [[]]
    assert await plugins.acall("tool_definition", tool_id="read", output=None) == ["async saw read"]


async def test_an_implementation_gets_only_the_arguments_it_names() -> None:
    received: list[tuple[str, str]] = []

    class Picky:
        @hookimpl
        def tool_execute_after(self, call_id: str, tool: str) -> None:
            received.append((call_id, tool))

    plugins = PluginManager(builtin=False)
    plugins.register(Picky())
    await plugins.acall(
        "tool_execute_after", tool="read", session_id="ses_1", call_id="c9", args={}, output=None
    )
    assert received == [("c9", "read")]


def test_call_refuses_a_coroutine_implementation_and_does_not_leave_it_unawaited() -> None:
    plugins = PluginManager(builtin=False)
    plugins.register(Appender("x", asynchronous=True), name="x")
    with pytest.raises(PluginError, match="'x' implements 'tool_execute_before' as a coroutine"):
        plugins.call(
            "tool_execute_before", tool="t", session_id="s", call_id="c", output=ToolArgs({"seen": []})
        )


async def test_an_exception_in_a_mutating_hook_propagates_with_a_note_naming_the_plugin() -> None:
    class Broken:
        @hookimpl
        def tool_execute_before(self) -> None:
            raise ValueError("boom")

    plugins = PluginManager(builtin=False)
    plugins.register(Appender("before"), name="before")
    plugins.register(Broken(), name="broken")
    plugins.register(Appender("after"), name="after")
    output = ToolArgs(args={"seen": []})
    with pytest.raises(ValueError, match="boom") as caught:
        await plugins.acall("tool_execute_before", tool="t", session_id="s", call_id="c", output=output)
    assert "raised by plugin 'broken' in hook 'tool_execute_before'" in caught.value.__notes__
    assert output.args["seen"] == ["before"]  # the chain stops at the failure


def test_an_observer_that_raises_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    class Flaky:
        @hookimpl
        def event(self, event: Event) -> None:
            if event.type == "session.created":
                raise RuntimeError("observer bug")
            seen.append(f"flaky:{event.type}")

    class Steady:
        @hookimpl
        def event(self, event: Event) -> None:
            seen.append(f"steady:{event.type}")

    class Async:
        @hookimpl
        async def event(self, event: Event) -> None:
            seen.append("never")

    plugins = PluginManager(builtin=False)
    for plugin, name in ((Flaky(), "flaky"), (Async(), "async"), (Steady(), "steady")):
        plugins.register(plugin, name=name)
    bus = Bus()
    bus.listen(plugins.observe_event)
    with caplog.at_level(logging.ERROR, logger="agentforge.plugins.manager"):
        bus.publish(Event(type="session.created", properties={}))
        bus.publish(Event(type="session.idle", properties={}))
    assert seen == ["steady:session.created", "flaky:session.idle", "steady:session.idle"]
    failures = [record.getMessage() for record in caplog.records]
    assert "Plugin 'flaky' failed in hook 'event'; skipped" in failures
    assert "Plugin 'async' failed in hook 'event'; skipped" in failures


async def test_calling_an_unknown_hook_or_with_wrong_arguments_is_a_caller_bug() -> None:
    plugins = PluginManager(builtin=False)
    with pytest.raises(ValueError, match="Unknown hook 'tool_defintion'"):
        await plugins.acall("tool_defintion", tool_id="x", output=None)
    with pytest.raises(TypeError, match=r"missing \['output'\] / unknown \['extra'\]"):
        await plugins.acall("tool_definition", tool_id="x", extra=1)


def test_registration_rejects_unknown_hooks_bad_arguments_wrappers_and_empty_plugins() -> None:
    class Typo:
        @hookimpl
        def tool_defintion(self, tool_id: str) -> None: ...

    class BadArgument:
        @hookimpl
        def tool_definition(self, tool_name: str) -> None: ...

    class Wrapper:
        @hookimpl(wrapper=True)
        def tool_definition(self, tool_id: str) -> Any:
            return (yield)

    class Empty:
        def tool_definition(self, tool_id: str) -> None: ...

    plugins = PluginManager(builtin=False)
    with pytest.raises(PluginLoadError, match=r"'typo'.*unknown hook 'tool_defintion'"):
        plugins.register(Typo(), name="typo")
    with pytest.raises(PluginLoadError, match=r"'bad'.*tool_name"):
        plugins.register(BadArgument(), name="bad")
    with pytest.raises(PluginLoadError, match=r"'wrapper'.*wrappers are not supported"):
        plugins.register(Wrapper(), name="wrapper")
    with pytest.raises(PluginLoadError, match=r"'empty'.*no hook implementations"):
        plugins.register(Empty(), name="empty")
    # A rejected plugin leaves nothing behind: its hooks are not called and its name is free again.
    assert plugins.plugin_names() == []
    assert not plugins.implements("tool_definition")


def test_registering_is_idempotent_and_names_are_unique() -> None:
    plugins = PluginManager(builtin=False)
    plugin = Appender("a")
    assert plugins.register(plugin, name="a") == "a"
    assert plugins.register(plugin, name="other") == "a"
    with pytest.raises(PluginLoadError, match=r"'a'.*already registered under this name"):
        plugins.register(Appender("b"), name="a")
    assert plugins.plugin_names() == ["a"]


def test_the_builtin_tools_come_from_the_builtin_plugin() -> None:
    plugins = PluginManager()
    assert plugins.plugin_names() == [BUILTIN_PLUGIN]
    assert [tool.id for tool in plugins.tools()] == [tool.id for tool in builtin_tools()]
    assert PluginManager(builtin=False).tools() == []


class LoudReadParams(BaseModel):
    filePath: str


class LoudRead(Tool[LoudReadParams]):
    id = "read"
    description = "A read that shouts"
    parameters: ClassVar[type[BaseModel]] = LoudReadParams

    async def execute(self, args: LoudReadParams, ctx: ToolContext) -> ToolResult:
        return ToolResult(output=args.filePath.upper())


class Overrider:
    @hookimpl
    def register_tools(self) -> list[Tool[Any]]:
        return [LoudRead()]


def test_a_plugin_tool_with_a_builtin_id_replaces_it_in_place() -> None:
    plugins = PluginManager()
    plugins.register(Overrider())
    registry = ToolRegistry.from_plugins(plugins)
    assert registry.names() == [tool.id for tool in builtin_tools()]
    assert isinstance(registry.get("read"), LoudRead)


def test_even_a_tryfirst_plugin_cannot_be_overridden_by_the_builtins() -> None:
    class EagerOverrider:
        @hookimpl(tryfirst=True)
        def register_tools(self) -> list[Tool[Any]]:
            return [LoudRead()]

    plugins = PluginManager()
    plugins.register(EagerOverrider())
    assert isinstance(ToolRegistry.from_plugins(plugins).get("read"), LoudRead)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("read", "must return a list of tools"),
        (["not a tool"], "returned 'not a tool', not a Tool instance"),
    ],
)
def test_register_tools_must_return_tool_instances(returned: Any, message: str) -> None:
    class Sloppy:
        @hookimpl
        def register_tools(self) -> Any:
            return returned

    plugins = PluginManager(builtin=False)
    plugins.register(Sloppy(), name="sloppy")
    with pytest.raises(PluginError, match=f"'sloppy': .*{message}"):
        plugins.tools()


def test_a_plugin_tool_needs_a_usable_id() -> None:
    class Spaced(LoudRead):
        id = "read file"

    class Provider:
        @hookimpl
        def register_tools(self) -> list[Tool[Any]]:
            return [Spaced()]

    plugins = PluginManager(builtin=False)
    plugins.register(Provider(), name="spaced")
    with pytest.raises(PluginError, match="needs an `id` of 1-64 letters"):
        plugins.tools()
