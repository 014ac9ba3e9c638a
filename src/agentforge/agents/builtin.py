"""The built-in agents (KERNEL 8.2), in listing order. Their permission rules come from
`permission.defaults`; the registry attaches them."""

from __future__ import annotations

from typing import Final

from agentforge.agents import prompts
from agentforge.agents.agent import Agent

BUILTIN_AGENTS: Final[tuple[Agent, ...]] = (
    Agent(
        name="build",
        description="The default agent. Executes tools based on configured permissions.",
        mode="primary",
        native=True,
    ),
    Agent(
        name="plan",
        description="Plan mode. Read-only: analyses and plans without editing files (except plan files).",
        mode="primary",
        native=True,
    ),
    Agent(
        name="general",
        description=(
            "General-purpose agent for researching complex questions and executing multi-step tasks. "
            "Use this agent to execute multiple units of work in parallel."
        ),
        mode="subagent",
        native=True,
    ),
    Agent(
        name="explore",
        description=(
            "Fast agent specialised in exploring codebases. Use it to find files by pattern "
            '(eg. "src/components/**/*.tsx"), search code for keywords (eg. "API endpoints"), or '
            'answer questions about the codebase (eg. "how do API endpoints work?"). When calling it, '
            'say how thorough it should be: "quick" for basic searches, "medium" for moderate '
            'exploration, or "very thorough" for a comprehensive analysis across several locations and '
            "naming conventions."
        ),
        mode="subagent",
        native=True,
        prompt=prompts.EXPLORE,
    ),
    Agent(name="compaction", mode="primary", native=True, hidden=True, prompt=prompts.COMPACTION),
    Agent(name="title", mode="primary", native=True, hidden=True, temperature=0.5, prompt=prompts.TITLE),
    Agent(name="summary", mode="primary", native=True, hidden=True, prompt=prompts.SUMMARY),
)
