"""Built-in permission rules (KERNEL 8.2): the base every agent starts from, and per-agent extras."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from agentforge.permission.rules import Rule, from_config

# Where the plan agent may write its plans inside the workspace (KERNEL 8.2, `.opencode/plans` there).
WORKSPACE_PLANS_GLOB: Final = ".agentforge/plans/*.md"

# The tools an explore agent keeps: they find and read, and change nothing in the workspace.
EXPLORE_TOOLS: Final = ("grep", "glob", "list", "bash", "webfetch", "websearch", "codesearch")

# Agents that only ever produce text (summaries, titles): no tool at all.
TEXT_ONLY_AGENTS: Final = frozenset({"compaction", "title", "summary"})

_ENV_FILES: Final[dict[str, str]] = {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"}


def base_rules(truncation_dir: Path | None = None) -> list[Rule]:
    """Everything allowed except: loops and paths outside the workspace ask, questions and plan-mode
    switches are off, and `.env` files (but not `.env.example`) ask before being read."""
    return from_config(
        {
            "*": "allow",
            "doom_loop": "ask",
            "external_directory": _outside(truncation_dir),
            "question": "deny",
            "plan_enter": "deny",
            "plan_exit": "deny",
            "read": _ENV_FILES,
        }
    )


def _outside(truncation_dir: Path | None) -> dict[str, str]:
    """Outside paths ask, except the truncated-output directory the truncation hint points to."""
    external: dict[str, str] = {"*": "ask"}
    if truncation_dir is not None:
        external[f"{truncation_dir.as_posix()}/*"] = "allow"
    return external


def agent_extras(
    agent: str, truncation_dir: Path | None = None, plans_dir: Path | None = None
) -> dict[str, Any]:
    """The agent's own rules in config form, applied over the base (the same layer, so they may
    re-open what the base closes and carve exceptions out of their own denies)."""
    if agent == "build":
        return {"question": "allow", "plan_enter": "allow"}
    if agent == "plan":
        return _plan_extras(plans_dir)
    if agent == "general":
        return {"todowrite": "deny"}
    if agent == "explore":
        tools: dict[str, Any] = {"*": "deny", **dict.fromkeys(EXPLORE_TOOLS, "allow")}
        return {**tools, "read": _ENV_FILES, "external_directory": _outside(truncation_dir)}
    if agent in TEXT_ONLY_AGENTS:
        return {"*": "deny"}
    return {}


def _plan_extras(plans_dir: Path | None) -> dict[str, Any]:
    """Plan is read-only, except for plan files: in the workspace, or in the data directory's plans."""
    edit: dict[str, str] = {"*": "deny", WORKSPACE_PLANS_GLOB: "allow"}
    rules: dict[str, Any] = {"question": "allow", "plan_exit": "allow"}
    if plans_dir is not None:
        edit[f"{plans_dir.as_posix()}/*.md"] = "allow"
        rules["external_directory"] = {f"{plans_dir.as_posix()}/*": "allow"}
    return {**rules, "edit": edit}


def agent_defaults(
    agent: str, truncation_dir: Path | None = None, plans_dir: Path | None = None
) -> list[Rule]:
    """One layer: the base, the agent's extras, and (unless the extras close outside paths, or
    everything, outright) the truncation directory allowed again, because the truncation hint points
    there."""
    extras = from_config(agent_extras(agent, truncation_dir, plans_dir))
    rules = [*base_rules(truncation_dir), *extras]
    closes_outside = any(
        r.permission in ("external_directory", "*") and r.pattern == "*" and r.action == "deny"
        for r in extras
    )
    if truncation_dir is not None and not closes_outside:
        rules.append(
            Rule(permission="external_directory", pattern=f"{truncation_dir.as_posix()}/*", action="allow")
        )
    return rules
