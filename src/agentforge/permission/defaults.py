"""Built-in permission rules (KERNEL 8.2): the base every agent starts from, and per-agent extras."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from agentforge.permission.rules import Rule, from_config

# Agents whose defaults differ from the base (the `build` agent may ask the user questions).
AGENT_EXTRAS: Final[dict[str, dict[str, Any]]] = {
    "build": {"question": "allow", "plan_enter": "allow"},
}


def base_rules(truncation_dir: Path | None = None) -> list[Rule]:
    """Everything allowed except: loops and paths outside the workspace ask, questions and plan-mode
    switches are off, and `.env` files (but not `.env.example`) ask before being read."""
    external: dict[str, str] = {"*": "ask"}
    if truncation_dir is not None:
        external[f"{truncation_dir.as_posix()}/*"] = "allow"
    return from_config(
        {
            "*": "allow",
            "doom_loop": "ask",
            "external_directory": external,
            "question": "deny",
            "plan_enter": "deny",
            "plan_exit": "deny",
            "read": {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"},
        }
    )


def agent_defaults(agent: str, truncation_dir: Path | None = None) -> list[Rule]:
    """One layer: the base, the agent's extras, and (unless the agent's own rules deny outside paths
    outright) the truncation directory allowed again, because the truncation hint points there."""
    extras = from_config(AGENT_EXTRAS.get(agent))
    rules = [*base_rules(truncation_dir), *extras]
    denies_outside = any(
        r.permission == "external_directory" and r.pattern == "*" and r.action == "deny" for r in extras
    )
    if truncation_dir is not None and not denies_outside:
        rules.append(
            Rule(permission="external_directory", pattern=f"{truncation_dir.as_posix()}/*", action="allow")
        )
    return rules
