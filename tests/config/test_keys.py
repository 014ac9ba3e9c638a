"""Unknown config keys are found, with the closest known key as a suggestion."""

from __future__ import annotations

from agentforge.config import Config
from agentforge.config.keys import unknown_keys


def describe(raw: dict[str, object]) -> list[str]:
    return [key.describe() for key in unknown_keys(Config.model_validate(raw))]


def test_known_keys_pass() -> None:
    raw = {
        "$schema": "https://opencode.ai/config.json",
        "model": "a/b",
        "permission": {"bash": "ask"},
        "permission_timeout": 30,
        "question_timeout": 30,
        "agent": {},
        "mcp": {},
        "title": False,
        "server": {"port": 1},
        "tool_output": {"max_lines": 10},
        "provider": {"mine": {"api": "openai", "options": {"anything": 1}}},
        "theme": "opencode",
    }
    assert describe(raw) == []


def test_typos_are_named_with_a_suggestion() -> None:
    assert describe({"permision": {"bash": "ask"}, "server": {"prot": 1}, "zzzz": 1}) == [
        "unknown config key 'permision' (did you mean 'permission'?)",
        "unknown config key 'zzzz'",
        "unknown config key 'server.prot' (did you mean 'port'?)",
    ]
