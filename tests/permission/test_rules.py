"""Rules: wildcard matching, the config format, layered merge (later layers only narrow), evaluation,
and which tools the rules hide from the model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentforge.permission.defaults import agent_defaults, base_rules
from agentforge.permission.rules import (
    InvalidRulesError,
    Rule,
    Ruleset,
    disabled_tools,
    evaluate,
    expand_home,
    from_config,
    from_tools_map,
    merge,
    permission_key,
    wildcard_match,
)


def rule(permission: str, pattern: str, action: str) -> Rule:
    return Rule.model_validate({"permission": permission, "pattern": pattern, "action": action})


# --- wildcards --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("*", "", True),
        ("*", "anything at all", True),
        ("src/*", "src/a/b/c.py", True),  # `*` crosses "/"
        ("*.py", "/abs/dir/file.py", True),
        ("*.py", "file.pyc", False),  # anchored at the end
        ("src/*", "lib/src/x", False),  # anchored at the start
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file12.txt", False),
        ("file?.txt", "file.txt", False),
        ("a.b", "axb", False),  # regex metacharacters are literal
        ("(x)+[y]{2}|$^", "(x)+[y]{2}|$^", True),
        ("*", "line one\nline two", True),  # dot matches newline
        ("echo *", "echo a\nb", True),
        ("git *", "git", True),  # " *" also matches the bare prefix
        ("git *", "git status", True),
        ("git *", "gitk", False),
        ("git *", "git-lfs", False),
        ("C:\\Users\\*", "C:/Users/me/file", True),  # backslashes normalised on both sides
        ("C:/Users/*", "C:\\Users\\me\\file", True),
        ("", "", True),
        ("", "x", False),
    ],
)
def test_wildcard_match(pattern: str, value: str, expected: bool) -> None:
    assert wildcard_match(pattern, value) is expected


# --- config format ----------------------------------------------------------------------------------


def test_a_bare_action_is_one_rule_for_everything() -> None:
    assert from_config("ask") == [rule("*", "*", "ask")]
    assert from_config(None) == []


def test_objects_flatten_in_insertion_order() -> None:
    rules = from_config({"bash": "ask", "read": {"*": "allow", "*.env": "deny"}, "edit": "deny"})
    assert rules == [
        rule("bash", "*", "ask"),
        rule("read", "*", "allow"),
        rule("read", "*.env", "deny"),
        rule("edit", "*", "deny"),
    ]


def test_home_prefixes_are_expanded() -> None:
    home = os.path.expanduser("~")
    rules = from_config({"external_directory": {"~/notes/*": "allow", "$HOME/x/*": "allow", "~": "deny"}})
    assert [r.pattern for r in rules] == [f"{home}/notes/*", f"{home}/x/*", home]
    assert expand_home("/etc/~/x") == "/etc/~/x"


@pytest.mark.parametrize(
    "bad", ["maybe", 3, ["allow"], {"bash": "sometimes"}, {"read": {"*": "yes"}}, {"bash": 1}]
)
def test_invalid_config_is_refused(bad: object) -> None:
    with pytest.raises(InvalidRulesError):
        from_config(bad)


def test_tools_map_becomes_allow_and_deny_rules() -> None:
    assert from_tools_map({"bash": False, "read": True}) == [
        rule("bash", "*", "deny"),
        rule("read", "*", "allow"),
    ]
    assert from_tools_map(None) == []


# --- evaluate ---------------------------------------------------------------------------------------


def test_last_matching_rule_wins_and_default_is_ask() -> None:
    rules = from_config({"bash": {"*": "ask", "git *": "allow", "git push *": "deny"}})
    assert evaluate("bash", "ls -la", rules).action == "ask"
    assert evaluate("bash", "git status", rules).action == "allow"
    assert evaluate("bash", "git push origin", rules) == rule("bash", "git push *", "deny")
    assert evaluate("edit", "x.py", rules) == rule("edit", "*", "ask")


def test_permission_keys_match_by_wildcard_too() -> None:
    rules = [rule("*", "*", "allow"), rule("mcp_*", "*", "ask")]
    assert evaluate("mcp_search", "q", rules).action == "ask"
    assert evaluate("read", "a.txt", rules).action == "allow"


def test_a_later_layer_narrows_allow_to_ask_and_deny() -> None:
    base = from_config({"*": "allow"})
    assert evaluate("bash", "ls", merge(base, from_config({"bash": "ask"}))).action == "ask"
    assert evaluate("bash", "ls", merge(base, from_config({"bash": "deny"}))).action == "deny"


def test_a_later_allow_cannot_reopen_an_earlier_deny() -> None:
    config = from_config({"bash": {"*": "allow", "rm *": "deny"}})
    session = from_config({"bash": "allow"})
    prompt = from_tools_map({"bash": True})
    merged = merge(config, session, prompt)
    assert evaluate("bash", "rm -rf /", merged) == rule("bash", "rm *", "deny")
    assert evaluate("bash", "ls", merged).action == "allow"


def test_a_later_layer_may_turn_ask_into_allow() -> None:
    merged = merge(from_config({"bash": "ask"}), from_config({"bash": {"git *": "allow"}}))
    assert evaluate("bash", "git log", merged).action == "allow"
    assert evaluate("bash", "make", merged).action == "ask"


def test_exceptions_inside_one_layer_still_hold() -> None:
    # Re-appending the earlier "*" deny would cancel its own exception: layers keep it intact.
    agent = from_config({"*": "deny", "grep": "allow"})
    merged = merge(agent, from_config({"bash": "allow"}))
    assert evaluate("grep", "x", merged).action == "allow"
    assert evaluate("bash", "ls", merged).action == "deny"
    # ...but a later layer can still narrow the exception.
    assert evaluate("grep", "x", merge(merged, from_config({"grep": "deny"}))).action == "deny"


def test_merge_flattens_rulesets_and_skips_empty_layers() -> None:
    first = merge([rule("a", "*", "allow")], [])
    assert first == Ruleset(((rule("a", "*", "allow"),),))
    both = merge(first, [rule("b", "*", "deny")])
    assert len(both.layers) == 2
    assert both.rules == [rule("a", "*", "allow"), rule("b", "*", "deny")]


# --- disabled tools ---------------------------------------------------------------------------------


def test_tools_denied_on_star_are_disabled() -> None:
    rules = from_config({"*": "allow", "bash": "deny", "grep": {"*.secret": "deny"}})
    assert disabled_tools(["bash", "grep", "read"], rules) == {"bash"}


def test_file_changing_tools_share_the_edit_key() -> None:
    assert permission_key("write") == "edit" and permission_key("apply_patch") == "edit"
    assert disabled_tools(["edit", "write", "apply_patch", "read"], from_config({"edit": "deny"})) == {
        "edit",
        "write",
        "apply_patch",
    }


def test_a_later_specific_rule_keeps_the_tool_visible_within_a_layer() -> None:
    rules = from_config({"bash": {"*": "deny", "git *": "allow"}})
    assert disabled_tools(["bash"], rules) == set()


def test_disabled_tools_follow_a_rule_changed_in_place() -> None:
    # The answer is reused between model calls: it must be keyed by the rules' values, not by the
    # rule objects, which are mutable.
    rules = from_config({"bash": "deny"})
    assert disabled_tools(["bash", "read"], rules) == {"bash"}
    rules[0].action = "allow"
    assert disabled_tools(["bash", "read"], rules) == set()
    rules[0].action = "deny"
    assert disabled_tools(["bash", "read"], rules) == {"bash"}
    assert disabled_tools(["read"], rules) == set()


def test_a_disabled_tool_stays_disabled_whatever_later_layers_say() -> None:
    merged = merge(from_config({"bash": "deny"}), from_tools_map({"bash": True}))
    assert disabled_tools(["bash"], merged) == {"bash"}
    assert disabled_tools(["bash"], merge(from_config({"*": "allow"}), from_tools_map({"bash": False}))) == {
        "bash"
    }


def test_a_star_deny_on_every_permission_disables_every_tool() -> None:
    assert disabled_tools(["read", "bash"], from_config("deny")) == {"read", "bash"}


# --- defaults ---------------------------------------------------------------------------------------


def test_base_defaults(tmp_path: Path) -> None:
    rules = base_rules(tmp_path / "out")
    assert evaluate("bash", "anything", rules).action == "allow"
    assert evaluate("doom_loop", "read", rules).action == "ask"
    assert evaluate("external_directory", "/etc/*", rules).action == "ask"
    assert evaluate("external_directory", f"{tmp_path}/out/*", rules).action == "allow"
    assert evaluate("question", "*", rules).action == "deny"
    assert evaluate("read", "/ws/.env", rules).action == "ask"
    assert evaluate("read", "/ws/.env.local", rules).action == "ask"
    assert evaluate("read", "/ws/.env.example", rules).action == "allow"
    assert evaluate("read", "/ws/main.py", rules).action == "allow"


def test_build_agent_may_ask_questions_and_others_may_not(tmp_path: Path) -> None:
    assert evaluate("question", "*", agent_defaults("build", tmp_path)).action == "allow"
    assert evaluate("question", "*", agent_defaults("custom", tmp_path)).action == "deny"
    truncated = f"{tmp_path.as_posix()}/*"
    assert evaluate("external_directory", truncated, agent_defaults("build", tmp_path)).action == "allow"
