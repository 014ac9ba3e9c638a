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


def test_a_typo_is_matched_to_a_key_we_use_before_an_unused_opencode_key() -> None:
    # "modle" is closer to opencode's unused "mode" by spelling; it is "model" that was meant.
    assert describe({"modle": "fake/test-model", "themee": "x"}) == [
        "unknown config key 'modle' (did you mean 'model'?)",
        "unknown config key 'themee' (did you mean 'theme'?)",
    ]
