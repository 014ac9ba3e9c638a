"""Agents carry their permission rules: built-in defaults, then the config layer, which only narrows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentforge.agents.registry import AgentRegistry
from agentforge.config import Config, ConfigError
from agentforge.permission.rules import disabled_tools, evaluate


def registry(tmp_path: Path, **config: Any) -> AgentRegistry:
    return AgentRegistry(Config.model_validate(config), data_dir=tmp_path)


def test_build_agent_gets_the_defaults(tmp_path: Path) -> None:
    build = registry(tmp_path).get("build")
    assert evaluate("bash", "ls", build.permission).action == "allow"
    assert evaluate("question", "*", build.permission).action == "allow"
    assert evaluate("external_directory", "/etc/*", build.permission).action == "ask"
    assert evaluate("external_directory", f"{tmp_path}/tool-output/*", build.permission).action == "allow"


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


def test_config_cannot_reopen_a_default_deny(tmp_path: Path) -> None:
    agents = registry(tmp_path, agent={"helper": {"permission": {"question": "allow"}}})
    assert evaluate("question", "*", agents.get("helper").permission).action == "deny"


@pytest.mark.parametrize(
    "config",
    [{"permission": {"bash": "sometimes"}}, {"agent": {"x": {"permission": 3}}}],
)
def test_invalid_permission_config_names_where(tmp_path: Path, config: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="permission"):
        registry(tmp_path, **config)
