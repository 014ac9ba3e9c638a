"""The system prompt of a model call (KERNEL 7.8, 5.6): at most two system messages.

Element 0 is the base prompt: the agent's own `prompt`, else the provider prompt for the model's family.
It stays the same across calls, which keeps provider prompt caches warm. Element 1 joins what varies:
the environment block, the instruction files, and the prompt's own `system` text.
"""

from __future__ import annotations

import datetime
import platform
from pathlib import Path

from agentforge.agents.registry import Agent
from agentforge.config import Settings, user_config_file
from agentforge.llm.provider import ResolvedModel
from agentforge.session.context.instructions import configured_patterns
from agentforge.session.context.prompts import provider_prompt
from agentforge.session.context.surroundings import Surroundings, SystemContext, look_around
from agentforge.tools.confinement import WorkspaceBoundary

MAX_STEPS_PROMPT = """CRITICAL - MAXIMUM STEPS REACHED

The maximum number of steps allowed for this task has been reached. Tools are disabled until the next
user input. Respond with text only: summarise the work done so far, list any remaining tasks that were
not completed, and recommend what should be done next."""


def base_prompt(agent: Agent, model: ResolvedModel) -> str:
    return agent.prompt or provider_prompt(model.request_model)


def context_for(
    settings: Settings, directory: str | Path, boundary: WorkspaceBoundary | None = None
) -> SystemContext:
    """The context of a session running in `directory` on a server with these settings."""
    return SystemContext(
        directory=Path(directory),
        workspace=settings.directory,
        config_dir=user_config_file().parent,
        instruction_patterns=configured_patterns(getattr(settings.config, "instructions", None)),
        boundary=boundary,
    )


async def system_prompt(
    agent: Agent,
    model: ResolvedModel,
    context: SystemContext,
    user_system: str | None = None,
    *,
    surroundings: Surroundings | None = None,
) -> list[str]:
    """[base prompt, environment + instructions + the user's system text]. `surroundings`: already
    looked up (the loop starts it before it reads history), else looked up now."""
    seen = surroundings if surroundings is not None else await look_around(context)
    pieces = [
        environment(model, context.directory, context.workspace, is_git=seen.is_git),
        *seen.instructions,
    ]
    if user_system:
        pieces.append(user_system)
    return [base_prompt(agent, model), "\n".join(pieces)]


def environment(model: ResolvedModel, directory: Path, workspace: Path, *, is_git: bool) -> str:
    api_id = model.request_model
    return "\n".join(
        [
            f"You are powered by the model named {api_id}. "
            f"The exact model ID is {model.provider_id}/{api_id}",
            "Here is some useful information about the environment you are running in:",
            "<env>",
            f"  Working directory: {directory}",
            f"  Workspace root folder: {workspace}",
            f"  Is directory a git repo: {'yes' if is_git else 'no'}",
            f"  Platform: {platform.system().lower()}",
            f"  Today's date: {datetime.date.today().strftime('%a %b %d %Y')}",
            "</env>",
        ]
    )
