"""System prompt pieces (KERNEL 7.8): the base prompt and the environment block."""

from __future__ import annotations

import datetime
import platform
from pathlib import Path

from agentforge.agents.registry import Agent
from agentforge.llm.provider import ResolvedModel

BASE_PROMPT = """You are Agent Forge, an agent that helps users with software engineering and
operations tasks. Use the tools available to you to inspect and change files and to run commands
inside the workspace. Be concise. Prefer doing the work with tools over describing it. When a tool
fails, read its error and adjust your next call instead of repeating it unchanged. When the task is
done, answer with a short summary."""

MAX_STEPS_PROMPT = """CRITICAL - MAXIMUM STEPS REACHED

The maximum number of steps allowed for this task has been reached. Tools are disabled until the next
user input. Respond with text only: summarise the work done so far, list any remaining tasks that were
not completed, and recommend what should be done next."""


def base_prompt(agent: Agent) -> str:
    return agent.prompt or BASE_PROMPT


def environment(model: ResolvedModel, directory: Path) -> str:
    is_git = any((parent / ".git").exists() for parent in (directory, *directory.parents))
    return "\n".join(
        [
            f"You are powered by the model named {model.model_id}. "
            f"The exact model ID is {model.provider_id}/{model.model_id}",
            "Here is some useful information about the environment you are running in:",
            "<env>",
            f"  Working directory: {directory}",
            f"  Workspace root folder: {directory}",
            f"  Is directory a git repo: {'yes' if is_git else 'no'}",
            f"  Platform: {platform.system().lower()}",
            f"  Today's date: {datetime.date.today().strftime('%a %b %d %Y')}",
            "</env>",
        ]
    )
