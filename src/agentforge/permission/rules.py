"""Permission rules (KERNEL 7.3): wildcard matching, the config format, layered merge, evaluation.

A rule is `{permission, pattern, action}`. Within one list of rules the last match wins. Rules come in
layers of decreasing trust (agent defaults < config < session < per-prompt), and a later layer may only
narrow an earlier one: it can turn `allow` into `ask` or `deny`, or `ask` into `allow`, but never
re-open what an earlier layer denied.

How narrowing is enforced: `merge` keeps the layers apart (a `Ruleset` is a tuple of layers), and
`evaluate` finds the last matching rule of every layer. The answer is the last layer's match, unless
some layer's own match is a `deny`: that deny stands. A flat list cannot express this (re-appending
earlier denies would also cancel that layer's own exceptions, such as `{"*": deny, "grep": allow}`),
which is why layers are kept. To let rules override each other freely, put them in one layer.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, get_args

from agentforge.model.session import PermissionRule

Rule: TypeAlias = PermissionRule
Action = Literal["allow", "deny", "ask"]
ACTIONS: Final = frozenset(get_args(Action))

# Tools whose permission key is not their own name: every file-changing tool asks `edit`.
EDIT_TOOLS: Final = frozenset({"edit", "write", "apply_patch", "multiedit"})


class InvalidRulesError(ValueError):
    """A `permission` value is not a single action or `{permission: action | {pattern: action}}`."""


# --- wildcards --------------------------------------------------------------------------------------


def wildcard_match(pattern: str, value: str) -> bool:
    """Whole-string match where `*` is any run of characters (crossing "/"), `?` one character.

    Backslashes count as "/" on both sides, and a pattern ending in " *" also matches its bare
    prefix, so "git *" matches "git" as well as "git status".
    """
    return _compile(pattern.replace("\\", "/")).fullmatch(value.replace("\\", "/")) is not None


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> re.Pattern[str]:
    optional_tail = pattern.endswith(" *")
    head = pattern[:-2] if optional_tail else pattern
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in head)
    if optional_tail:
        body += "( .*)?"
    flags = re.DOTALL | (re.IGNORECASE if os.name == "nt" else 0)
    return re.compile(body, flags)


# --- the config format ------------------------------------------------------------------------------


def from_config(value: Any) -> list[Rule]:
    """Rules from a config `permission` value, in insertion order.

    `"ask"` means `{"*": {"*": "ask"}}`; `{"bash": "ask"}` means pattern "*"; `{"read": {"*.env":
    "deny"}}` gives one rule per pattern. `~`, `~/` and `$HOME` prefixes of patterns are expanded.
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [Rule(permission="*", pattern="*", action=_action(value, "permission"))]
    if not isinstance(value, Mapping):
        raise InvalidRulesError(f"permission must be an action or an object, got {type(value).__name__}")
    rules: list[Rule] = []
    for permission, setting in value.items():
        if isinstance(setting, str):
            rules.append(Rule(permission=permission, pattern="*", action=_action(setting, permission)))
        elif isinstance(setting, Mapping):
            for pattern, action in setting.items():
                where = f"{permission}.{pattern}"
                rules.append(
                    Rule(permission=permission, pattern=expand_home(pattern), action=_action(action, where))
                )
        else:
            raise InvalidRulesError(f"permission.{permission} must be an action or an object of patterns")
    return rules


def _action(value: Any, where: str) -> Action:
    if value not in ACTIONS:
        raise InvalidRulesError(f"{where}: {value!r} is not one of allow, ask, deny")
    action: Action = value
    return action


def expand_home(pattern: str) -> str:
    home = os.path.expanduser("~")
    if pattern == "~":
        return home
    if pattern.startswith("~/"):
        return home + pattern[1:]
    if pattern.startswith("$HOME"):
        return home + pattern[len("$HOME") :]
    return pattern


def from_tools_map(tools: Mapping[str, bool] | None) -> list[Rule]:
    """The deprecated per-prompt `tools: {name: bool}` map as rules (KERNEL 4.1 step 4)."""
    return [
        Rule(permission=name, pattern="*", action="allow" if enabled else "deny")
        for name, enabled in (tools or {}).items()
    ]


# --- layers -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ruleset:
    """Layers of rules, most trusted first. Later layers may only narrow earlier ones."""

    layers: tuple[tuple[Rule, ...], ...] = ()

    @property
    def rules(self) -> list[Rule]:
        """All rules in order (what a client is shown; evaluation also needs the layer bounds)."""
        return [rule for layer in self.layers for rule in layer]


RuleSource: TypeAlias = Ruleset | Iterable[Rule]


def merge(*sources: RuleSource) -> Ruleset:
    """Stack rule sources as layers: a plain list is one layer, a Ruleset brings its own layers."""
    layers: list[tuple[Rule, ...]] = []
    for source in sources:
        if isinstance(source, Ruleset):
            layers.extend(source.layers)
        else:
            layers.append(tuple(source))
    return Ruleset(tuple(layer for layer in layers if layer))


def evaluate(permission: str, pattern: str, *sources: RuleSource) -> Rule:
    """The rule that decides `permission` on `pattern`: the last match, unless a layer denies.

    Without any matching rule the answer is `ask` (pattern "*").
    """
    decided: Rule | None = None
    veto: Rule | None = None
    for layer in merge(*sources).layers:
        found = _last_match(layer, lambda rule: _matches(rule, permission, pattern))
        if found is None:
            continue
        decided = found
        if found.action == "deny" and veto is None:
            veto = found
    return veto or decided or Rule(permission=permission, pattern="*", action="ask")


def permission_key(tool_name: str) -> str:
    return "edit" if tool_name in EDIT_TOOLS else tool_name


def disabled_tools(tool_names: Iterable[str], *sources: RuleSource) -> set[str]:
    """Tools to hide from the model: some layer's last rule for the tool's permission key is a deny
    on "*" (KERNEL 5.6). A deny on specific patterns leaves the tool visible; calls get refused."""
    # Asked every model call with the same tools and rules: the answer is reused.
    return set(_disabled(tuple(tool_names), frozen(*sources)))


_FrozenLayer: TypeAlias = tuple[tuple[str, str, str], ...]
# Rules as plain values, to key what is computed from them (the rule models are mutable, so a key
# never holds them or their identity).
FrozenRules: TypeAlias = tuple[_FrozenLayer, ...]


def frozen(*sources: RuleSource) -> FrozenRules:
    layers = merge(*sources).layers
    return tuple(tuple((rule.permission, rule.pattern, rule.action) for rule in layer) for layer in layers)


def thawed(rules: FrozenRules) -> Ruleset:
    return Ruleset(
        tuple(
            tuple(
                Rule(permission=permission, pattern=pattern, action=action)
                for permission, pattern, action in layer
            )
            for layer in rules
        )
    )


@functools.lru_cache(maxsize=512)
def _disabled(tool_names: tuple[str, ...], layers: FrozenRules) -> frozenset[str]:
    return frozenset(
        name for name in tool_names if any(_denies_whole(layer, permission_key(name)) for layer in layers)
    )


def _denies_whole(layer: _FrozenLayer, key: str) -> bool:
    for permission, pattern, action in reversed(layer):
        if wildcard_match(permission, key):
            return pattern == "*" and action == "deny"
    return False


def _matches(rule: Rule, permission: str, pattern: str) -> bool:
    return wildcard_match(rule.permission, permission) and wildcard_match(rule.pattern, pattern)


def _last_match(layer: tuple[Rule, ...], accept: Callable[[Rule], bool]) -> Rule | None:
    for rule in reversed(layer):
        if accept(rule):
            return rule
    return None
