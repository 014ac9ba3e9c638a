from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentforge.config import Config, ConfigError, Settings
from agentforge.llm.messages import ModelRequest
from agentforge.plugins import PluginLoadError, PluginManager, calls
from agentforge.plugins.loader import (
    ENTRY_POINT_GROUP,
    configured_specs,
    create_plugin_manager,
    load_configured,
    load_entry_points,
)
from agentforge.plugins.manager import BUILTIN_PLUGIN
from agentforge.tools.base import PermissionRequest, ToolError
from agentforge.tools.execute import run_tool
from agentforge.tools.registry import ToolRegistry
from tests.plugins.conftest import WritePlugin, write_source
from tests.plugins.test_calls import MODEL
from tests.tools.harness import Harness

GUARD_PLUGIN = """
    import asyncio
    from typing import ClassVar

    from pydantic import BaseModel

    from agentforge.plugins import hookimpl
    from agentforge.tools.base import Tool, ToolError, ToolResult


    class ShoutParams(BaseModel):
        text: str


    class ShoutTool(Tool[ShoutParams]):
        id = "shout"
        description = "Upper-cases text"
        parameters: ClassVar[type[BaseModel]] = ShoutParams

        async def execute(self, args, ctx):
            return ToolResult(title="shout", output=args.text.upper(), metadata={"session": ctx.session_id})


    @hookimpl
    def register_tools():
        return [ShoutTool()]


    @hookimpl
    def tool_definition(tool_id, output):
        if tool_id == "read":
            output.description = "Read a file. Audited by the guard plugin."


    @hookimpl
    async def tool_execute_before(tool, output):
        await asyncio.sleep(0)
        if tool == "bash" and "rm -rf" in output.args.get("command", ""):
            raise ToolError("Blocked by the guard plugin: rm -rf is not allowed")


    @hookimpl
    async def permission_ask(request, session_id, output):
        await asyncio.sleep(0)
        if request.permission == "read":
            output.status = "allow"
        elif request.permission == "external_directory":
            output.status = "deny"
"""


def settings_for(tmp_path: Path, plugin: object) -> Settings:
    """Settings as load_settings builds them, with a config file in `tmp_path/config`."""
    config_file = write_source(tmp_path / "config" / "agentforge.json", "{}")
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return Settings(
        config=Config.model_validate({"plugin": plugin}),
        data_dir=tmp_path / "data",
        database_url="sqlite://",
        host="127.0.0.1",
        port=0,
        directory=workspace,
        config_sources=(config_file,),
    )


@pytest.fixture
def guarded(tmp_path: Path, write_plugin: WritePlugin) -> PluginManager:
    write_plugin(tmp_path / "config" / "plugins" / "guard.py", GUARD_PLUGIN)
    return create_plugin_manager(settings_for(tmp_path, ["./plugins/guard.py"]))


@pytest.fixture
def workspace_harness(tmp_path: Path) -> Harness:
    """A tool context whose workspace is the one `settings_for` configures."""
    (tmp_path / "workspace").mkdir(exist_ok=True)
    return Harness(workspace=tmp_path / "workspace", data_dir=tmp_path / "data")


def test_a_plugin_file_from_the_config_is_registered_after_the_builtins(guarded: PluginManager) -> None:
    assert guarded.plugin_names() == [BUILTIN_PLUGIN, "./plugins/guard.py"]


async def test_a_plugin_changes_a_tool_description(guarded: PluginManager) -> None:
    registry = ToolRegistry.from_plugins(guarded)
    described = {spec.name: spec.description for spec in await calls.tool_specs(guarded, registry.all())}
    assert described["read"] == "Read a file. Audited by the guard plugin."
    assert described["bash"] == registry.get("bash").description  # type: ignore[union-attr]


async def test_a_plugin_blocks_a_tool_call_before_it_runs(
    guarded: PluginManager, workspace_harness: Harness
) -> None:
    bash = ToolRegistry.from_plugins(guarded).get("bash")
    assert bash is not None
    blocked = {"command": "touch ran.txt && rm -rf nothing", "description": "Clean up"}
    with pytest.raises(ToolError, match="Blocked by the guard plugin: rm -rf is not allowed"):
        await calls.run_tool_with_hooks(
            guarded, bash, blocked, workspace_harness.context(), limits=workspace_harness.limits
        )
    assert not (workspace_harness.workspace / "ran.txt").exists()

    allowed = {"command": "echo still-works", "description": "Print a word"}
    result = await calls.run_tool_with_hooks(
        guarded, bash, allowed, workspace_harness.context(), limits=workspace_harness.limits
    )
    assert "still-works" in result.output


async def test_a_plugin_answers_permission_requests(guarded: PluginManager) -> None:
    def request(permission: str) -> PermissionRequest:
        return PermissionRequest(permission=permission, patterns=["*"])

    assert await calls.permission_status(guarded, request("read"), "ses_1") == "allow"
    assert await calls.permission_status(guarded, request("external_directory"), "ses_1") == "deny"
    assert await calls.permission_status(guarded, request("bash"), "ses_1") == "ask"


async def test_a_plugin_adds_a_custom_tool_that_runs_like_any_other(
    guarded: PluginManager, workspace_harness: Harness
) -> None:
    registry = ToolRegistry.from_plugins(guarded)
    assert registry.names()[-1] == "shout"
    assert "bash" in registry.names()
    shout = registry.get("shout")
    assert shout is not None
    ctx = workspace_harness.context()
    result = await run_tool(shout, {"text": "hi"}, ctx, limits=workspace_harness.limits)
    assert (result.title, result.output) == ("shout", "HI")
    assert result.metadata == {"session": ctx.session_id, "truncated": False}
    with pytest.raises(
        ToolError, match="The shout tool was called with invalid arguments: `text` is required"
    ):
        await run_tool(shout, {}, ctx, limits=workspace_harness.limits)


async def test_relative_paths_are_looked_up_next_to_the_config_first_then_in_the_workspace(
    tmp_path: Path, write_plugin: WritePlugin
) -> None:
    marker = """
        from agentforge.plugins import hookimpl

        @hookimpl
        def chat_headers(output):
            output.headers[{header!r}] = {where!r}
    """
    write_plugin(tmp_path / "workspace" / "both.py", marker.format(header="x-both", where="workspace"))
    write_plugin(tmp_path / "config" / "both.py", marker.format(header="x-both", where="config"))
    write_plugin(tmp_path / "workspace" / "only_here.py", marker.format(header="x-only", where="workspace"))
    plugins = create_plugin_manager(settings_for(tmp_path, ["both.py", "only_here.py"]))
    request = ModelRequest(system=[], messages=[])
    await calls.model_request(plugins, request, session_id="ses_1", agent="build", model=MODEL)
    assert request.headers == {"x-both": "config", "x-only": "workspace"}


def test_the_same_file_named_twice_is_registered_once(tmp_path: Path, write_plugin: WritePlugin) -> None:
    path = write_plugin(tmp_path / "config" / "guard.py", GUARD_PLUGIN)
    plugins = create_plugin_manager(settings_for(tmp_path, ["./guard.py", str(path)]))
    assert plugins.plugin_names() == [BUILTIN_PLUGIN, "./guard.py"]
    assert [tool.id for tool in plugins.tools()].count("shout") == 1


def test_a_dotted_module_name_is_imported(
    tmp_path: Path, write_plugin: WritePlugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plugin(tmp_path / "site" / "fixture_plugin_pkg" / "__init__.py", "")
    write_plugin(tmp_path / "site" / "fixture_plugin_pkg" / "audit.py", GUARD_PLUGIN)
    monkeypatch.syspath_prepend(tmp_path / "site")
    plugins = PluginManager()
    assert load_configured(plugins, ["fixture_plugin_pkg.audit"], search_dirs=[]) == [
        "fixture_plugin_pkg.audit"
    ]
    assert "shout" in [tool.id for tool in plugins.tools()]


def make_distribution(site: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """An installed distribution as pip leaves it: modules plus a dist-info with entry_points.txt."""
    info = site / f"{name}-0.1.dist-info"
    write_source(info / "METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    write_source(info / "entry_points.txt", entry_points)
    for module, source in modules.items():
        write_source(site / f"{module}.py", source)


def test_installed_packages_register_through_their_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_distribution(
        tmp_path / "site",
        "fixture-guard",
        f"[{ENTRY_POINT_GROUP}]\nguard = fixture_plugin_guard\n",
        {"fixture_plugin_guard": GUARD_PLUGIN},
    )
    monkeypatch.syspath_prepend(tmp_path / "site")
    plugins = create_plugin_manager(settings_for(tmp_path, []))
    assert plugins.plugin_names() == [BUILTIN_PLUGIN, "guard"]
    assert "shout" in [tool.id for tool in plugins.tools()]


def test_an_entry_point_may_name_an_object_inside_a_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = """
        from agentforge.plugins import hookimpl

        class Headers:
            @hookimpl
            def chat_headers(self, output):
                output.headers["x-team"] = "platform"

        plugin = Headers()
    """
    make_distribution(
        tmp_path / "site",
        "fixture-headers",
        f"[{ENTRY_POINT_GROUP}]\nheaders = fixture_plugin_headers:plugin\n",
        {"fixture_plugin_headers": source},
    )
    monkeypatch.syspath_prepend(tmp_path / "site")
    plugins = PluginManager(builtin=False)
    assert load_entry_points(plugins) == ["headers"]
    assert plugins.implements("chat_headers")


def test_a_broken_entry_point_names_the_plugin_and_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_distribution(
        tmp_path / "site",
        "fixture-broken",
        f"[{ENTRY_POINT_GROUP}]\nbroken = fixture_plugin_broken\n",
        {"fixture_plugin_broken": "import fixture_plugin_dependency_that_is_missing\n"},
    )
    monkeypatch.syspath_prepend(tmp_path / "site")
    with pytest.raises(PluginLoadError) as caught:
        load_entry_points(PluginManager(builtin=False))
    assert caught.value.plugin == "broken"
    assert str(caught.value) == (
        "Plugin 'broken' could not be loaded: entry point 'fixture_plugin_broken' of package "
        "'fixture-broken' failed to import: ModuleNotFoundError: No module named "
        "'fixture_plugin_dependency_that_is_missing'"
    )


def test_a_missing_file_says_where_it_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(PluginLoadError) as caught:
        create_plugin_manager(settings_for(tmp_path, ["./nope.py"]))
    assert caught.value.plugin == "./nope.py"
    config_dir, workspace = (tmp_path / "config").resolve(), (tmp_path / "workspace").resolve()
    assert caught.value.reason == f"file not found (looked for {config_dir}/nope.py, {workspace}/nope.py)"


def test_a_plugin_with_a_syntax_error_names_the_file_and_line(
    tmp_path: Path, write_plugin: WritePlugin
) -> None:
    path = write_plugin(tmp_path / "config" / "typo.py", "def broken(:\n    pass\n")
    with pytest.raises(PluginLoadError) as caught:
        create_plugin_manager(settings_for(tmp_path, ["typo.py"]))
    assert caught.value.plugin == "typo.py"
    assert caught.value.reason.startswith(f"importing {path.resolve()} raised SyntaxError: ")
    assert "line 1" in caught.value.reason
    assert not any(name.startswith("agentforge_plugin_typo") for name in sys.modules)


def test_a_plugin_that_fails_while_importing_can_be_fixed_and_loaded_again(
    tmp_path: Path, write_plugin: WritePlugin
) -> None:
    path = write_plugin(tmp_path / "config" / "flaky.py", "raise RuntimeError('not configured yet')\n")
    with pytest.raises(PluginLoadError, match=r"raised RuntimeError: not configured yet"):
        create_plugin_manager(settings_for(tmp_path, ["flaky.py"]))
    write_plugin(path, GUARD_PLUGIN)
    assert "flaky.py" in create_plugin_manager(settings_for(tmp_path, ["flaky.py"])).plugin_names()


def test_a_plugin_file_implementing_an_unknown_hook_is_refused(
    tmp_path: Path, write_plugin: WritePlugin
) -> None:
    write_plugin(
        tmp_path / "config" / "typo_hook.py",
        """
        from agentforge.plugins import hookimpl

        @hookimpl
        def tool_execute_befor(output):
            pass
        """,
    )
    with pytest.raises(PluginLoadError, match=r"^Plugin 'typo_hook.py' could not be loaded: unknown hook"):
        create_plugin_manager(settings_for(tmp_path, ["typo_hook.py"]))


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("fixture_plugin_absent.module", "no module named 'fixture_plugin_absent' is installed"),
        ("my plugin", "expected a path to a .py file or a dotted module name"),
        ("./notes.txt", "is not a .py file"),
    ],
)
def test_unusable_specs_get_a_clear_reason(
    tmp_path: Path, write_plugin: WritePlugin, spec: str, reason: str
) -> None:
    write_plugin(tmp_path / "workspace" / "notes.txt", "hello")
    with pytest.raises(PluginLoadError, match=reason) as caught:
        create_plugin_manager(settings_for(tmp_path, [spec]))
    assert caught.value.plugin == spec


def test_the_plugin_key_must_be_a_list_of_strings() -> None:
    assert configured_specs(Config.model_validate({})) == []
    assert configured_specs(Config.model_validate({"plugin": "./one.py"})) == ["./one.py"]
    with pytest.raises(ConfigError, match=r"`plugin` must be a list of \.py file paths or module names"):
        configured_specs(Config.model_validate({"plugin": [{"path": "x.py"}]}))
