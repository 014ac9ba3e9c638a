"""The agent record (KERNEL 8.1) and its wire shape for `GET /agent`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentforge.model.agent import AgentInfo, AgentModelRef, Mode
from agentforge.permission.rules import Ruleset

__all__ = ["Agent", "AgentInfo", "AgentModelRef", "Mode", "UnknownAgentError", "agent_info"]


class UnknownAgentError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Agent:
    """`prompt` replaces the provider prompt; `model` is "provider/model"; `steps` caps the loop's
    model calls per turn; `options` are extra provider options."""

    name: str
    description: str = ""
    mode: Mode = "all"
    native: bool = False
    hidden: bool = False
    prompt: str | None = None
    model: str | None = None
    variant: str | None = None
    color: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    steps: int | None = None
    options: dict[str, Any] | None = None
    permission: Ruleset = field(default_factory=Ruleset)

    @property
    def is_primary(self) -> bool:
        """Can run a session's turns itself (subagents only run under the task tool)."""
        return self.mode != "subagent"

    def variant_for(self, provider_id: str, model_id: str) -> str | None:
        """The agent's variant, when the model is the agent's own (a variant belongs to a model)."""
        if self.variant is None or self.model is None:
            return None
        own_provider, _, own_model = self.model.partition("/")
        return self.variant if (own_provider, own_model) == (provider_id, model_id) else None


def agent_info(agent: Agent) -> AgentInfo:
    """The agent's wire shape (`model/agent.py`, shared with the SDK)."""
    model = None
    if agent.model:
        provider_id, _, model_id = agent.model.partition("/")
        model = AgentModelRef(provider_id=provider_id, model_id=model_id)
    return AgentInfo(
        name=agent.name,
        description=agent.description or None,
        mode=agent.mode,
        native=agent.native,
        hidden=agent.hidden,
        top_p=agent.top_p,
        temperature=agent.temperature,
        color=agent.color,
        permission=agent.permission.rules,
        model=model,
        variant=agent.variant,
        prompt=agent.prompt,
        options=dict(agent.options or {}),
        steps=agent.steps,
    )
