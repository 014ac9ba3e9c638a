"""The agent registry: built-ins and their default rules, config and Markdown overrides, the default agent.
Agents carry their permission rules: built-in defaults, then the config layer, which only narrows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentforge.agents.agent import agent_info
from agentforge.agents.markdown import MarkdownDefinition
from agentforge.agents.registry import AgentRegistry, UnknownAgentError
from agentforge.config import Config, ConfigError
from agentforge.permission.rules import disabled_tools, evaluate

ALL_TOOLS = ["bash", "read", "glob", "grep", "list", "edit", "write", "apply_patch", "task", "todowrite"]


def registry(tmp_path: Path, files: list[MarkdownDefinition] | None = None, **config: Any) -> AgentRegistry:
    return AgentRegistry(Config.model_validate(config), data_dir=tmp_path, files=files or [])


def md(tmp_path: Path, name: str, body: str = "", **fields: Any) -> MarkdownDefinition:
    return MarkdownDefinition(name=name, path=tmp_path / f"{name}.md", fields=fields, body=body)


def test_build_agent_gets_the_defaults(tmp_path: Path) -> None:
    build = registry(tmp_path).get("build")
    assert evaluate("bash", "ls", build.permission).action == "allow"
    assert evaluate("question", "*", build.permission).action == "allow"
    assert evaluate("external_directory", "/etc/*", build.permission).action == "ask"
    assert evaluate("external_directory", f"{tmp_path}/tool-output/*", build.permission).action == "allow"


def test_builtins_are_listed_default_first_then_by_name(tmp_path: Path) -> None:
    agents = registry(tmp_path).list()
    assert [a.name for a in agents] == [
        "build",
        "compaction",
        "explore",
        "general",
        "plan",
        "summary",
        "title",
    ]
    modes = {a.name: (a.mode, a.hidden) for a in agents}
    assert modes["plan"] == ("primary", False)
    assert modes["general"] == modes["explore"] == ("subagent", False)
    assert modes["compaction"] == modes["title"] == modes["summary"] == ("primary", True)
    assert all(a.native and a.description for a in agents if not a.hidden)
    assert registry(tmp_path).get("title").temperature == 0.5
    assert "## Relevant files" in (registry(tmp_path).get("compaction").prompt or "")
    assert [a.name for a in registry(tmp_path).subagents()] == ["explore", "general"]


def test_plan_may_only_edit_plan_files(tmp_path: Path) -> None:
    plan = registry(tmp_path).get("plan").permission
    assert evaluate("edit", "src/app.py", plan).action == "deny"
    assert evaluate("edit", ".agentforge/plans/refactor.md", plan).action == "allow"
    assert evaluate("edit", f"{tmp_path}/plans/refactor.md", plan).action == "allow"
    assert evaluate("external_directory", f"{tmp_path}/plans/*", plan).action == "allow"
    assert evaluate("question", "*", plan).action == "allow"
    assert evaluate("plan_exit", "*", plan).action == "allow"
    # The tools stay offered (plan files are writable); calls elsewhere are refused.
    assert disabled_tools(["edit", "write"], plan) == set()


def test_explore_keeps_only_read_tools(tmp_path: Path) -> None:
    explore = registry(tmp_path).get("explore").permission
    assert disabled_tools(ALL_TOOLS, explore) == {"edit", "write", "apply_patch", "task", "todowrite"}
    assert evaluate("read", "src/app.py", explore).action == "allow"
    assert evaluate("read", ".env", explore).action == "ask"
    assert evaluate("external_directory", "/etc/*", explore).action == "ask"
    assert evaluate("external_directory", f"{tmp_path}/tool-output/*", explore).action == "allow"


@pytest.mark.parametrize("name", ["compaction", "title", "summary"])
def test_hidden_agents_may_use_no_tool(tmp_path: Path, name: str) -> None:
    rules = registry(tmp_path).get(name).permission
    assert disabled_tools(ALL_TOOLS, rules) == set(ALL_TOOLS)
    assert evaluate("external_directory", f"{tmp_path}/tool-output/*", rules).action == "deny"


def test_general_may_not_keep_todos(tmp_path: Path) -> None:
    assert disabled_tools(ALL_TOOLS, registry(tmp_path).get("general").permission) == {"todowrite"}


def test_config_adds_agents_and_overrides_builtin_fields(tmp_path: Path) -> None:
    agents = registry(
        tmp_path,
        agent={
            "plan": {"model": "fake/big", "temperature": 0.2, "maxSteps": 4, "reasoningEffort": "high"},
            "reviewer": {"description": "Reviews diffs", "prompt": "Review.", "top_p": 0.9, "steps": 3},
        },
    )
    plan = agents.get("plan")
    assert (plan.model, plan.temperature, plan.steps, plan.mode) == ("fake/big", 0.2, 4, "primary")
    assert plan.options == {"reasoningEffort": "high"}  # unknown keys are provider options
    assert evaluate("edit", "src/app.py", plan.permission).action == "deny"  # defaults kept
    reviewer = agents.get("reviewer")
    assert (reviewer.mode, reviewer.prompt, reviewer.top_p, reviewer.steps) == ("all", "Review.", 0.9, 3)
    assert not reviewer.native


def test_disable_removes_an_agent_and_the_default_moves_on(tmp_path: Path) -> None:
    agents = registry(tmp_path, agent={"build": {"disable": True}, "general": {"disable": True}})
    with pytest.raises(UnknownAgentError, match='Agent not found: "build"'):
        agents.get("build")
    assert agents.default_name == "plan"
    assert "general" not in [a.name for a in agents.list()]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"default_agent": "nobody"}, "not an agent"),
        ({"default_agent": "explore"}, "visible primary agent"),
        ({"default_agent": "title"}, "visible primary agent"),
        ({"agent": {"build": {"disable": True}, "plan": {"disable": True}}}, "no visible primary agent"),
    ],
)
def test_default_agent_must_be_a_visible_primary_agent(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        registry(tmp_path, **config)


def test_default_agent_is_listed_first(tmp_path: Path) -> None:
    agents = registry(tmp_path, default_agent="plan")
    assert agents.default_name == "plan"
    assert [a.name for a in agents.list()][:2] == ["plan", "build"]


def test_markdown_files_stack_over_the_config_entry(tmp_path: Path) -> None:
    files = [
        md(tmp_path / "global", "reviewer", "Global prompt.", temperature=0.3),
        md(tmp_path / "workspace", "reviewer", "Workspace prompt.", mode="subagent"),
    ]
    agents = registry(
        tmp_path, files, agent={"reviewer": {"description": "From config", "temperature": 0.9, "steps": 2}}
    )
    reviewer = agents.get("reviewer")
    assert reviewer.description == "From config"
    assert (reviewer.temperature, reviewer.steps, reviewer.mode) == (0.3, 2, "subagent")
    assert reviewer.prompt == "Workspace prompt."


def test_markdown_file_with_permission_and_disable(tmp_path: Path) -> None:
    files = [
        MarkdownDefinition(
            name="docs",
            path=tmp_path / "docs.md",
            fields={"name": "Docs writer", "permission": {"bash": "deny"}},
            body="Write docs.",
        ),
        md(tmp_path, "plan", disable=True),
    ]
    agents = registry(tmp_path, files)
    docs = agents.get("docs")
    assert disabled_tools(["bash", "read"], docs.permission) == {"bash"}
    assert (docs.prompt, docs.options) == ("Write docs.", None)
    assert "plan" not in [a.name for a in agents.list()]


def test_variant_goes_with_the_agents_own_model(tmp_path: Path) -> None:
    plan = registry(tmp_path, agent={"plan": {"model": "fake/big", "variant": "high"}}).get("plan")
    assert plan.variant_for("fake", "big") == "high"
    assert plan.variant_for("fake", "small") is None


def test_wire_shape(tmp_path: Path) -> None:
    agents = registry(tmp_path, agent={"plan": {"model": "fake/org/big", "top_p": 0.5, "color": "#ff0000"}})
    wire = agent_info(agents.get("plan")).wire()
    assert wire["model"] == {"providerID": "fake", "modelID": "org/big"}
    assert (wire["mode"], wire["native"], wire["topP"], wire["color"]) == ("primary", True, 0.5, "#ff0000")
    assert {"permission": "edit", "pattern": "*", "action": "deny"} in wire["permission"]
    assert "prompt" not in wire  # plan uses the provider prompt


def test_config_rules_apply_to_every_agent_and_agent_rules_to_one(tmp_path: Path) -> None:
    agents = registry(
        tmp_path,
        permission={"bash": "ask"},
        agent={"reviewer": {"mode": "subagent", "permission": {"edit": "deny", "bash": {"git *": "allow"}}}},
    )
    build, reviewer = agents.get("build"), agents.get("reviewer")
    assert evaluate("bash", "make", build.permission).action == "ask"
    assert evaluate("bash", "git log", reviewer.permission).action == "allow"
    assert evaluate("bash", "make", reviewer.permission).action == "ask"
    assert disabled_tools(["edit", "write", "read"], reviewer.permission) == {"edit", "write"}
    assert disabled_tools(["edit"], build.permission) == set()
    # A custom agent does not get the build agent's extras.
    assert evaluate("question", "*", reviewer.permission).action == "deny"


def test_deprecated_tools_map_becomes_rules(tmp_path: Path) -> None:
    agents = registry(tmp_path, agent={"helper": {"tools": {"bash": False}, "permission": {"edit": "ask"}}})
    helper = agents.get("helper")
    assert disabled_tools(["bash", "edit"], helper.permission) == {"bash"}
    assert evaluate("edit", "a.py", helper.permission).action == "ask"
    assert helper.options is None  # `tools` is not a provider option


def test_config_cannot_reopen_a_default_deny(tmp_path: Path) -> None:
    agents = registry(tmp_path, agent={"helper": {"permission": {"question": "allow"}}})
    assert evaluate("question", "*", agents.get("helper").permission).action == "deny"


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"permission": {"bash": "sometimes"}}, "permission"),
        ({"agent": {"x": {"permission": 3}}}, "permission"),
        ({"agent": {"x": {"mode": "boss"}}}, "agent.x: invalid agent: mode"),
        ({"agent": {"x": {"steps": 0}}}, "agent.x: invalid agent: steps"),
        ({"agent": {"x": {"model": "no-provider"}}}, "provider/model"),
        ({"agent": {"x": "build"}}, "agent.x: an agent must be an object"),
    ],
)
def test_invalid_agent_config_names_where(tmp_path: Path, config: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        registry(tmp_path, **config)


def test_invalid_markdown_agent_names_its_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"bad\.md: invalid agent: temperature"):
        registry(tmp_path, [md(tmp_path, "bad", temperature="warm")])
