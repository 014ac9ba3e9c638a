"""Agents (KERNEL 8.1): a name, a mode, an optional prompt, model, temperature and step limit.

This is the kernel's subset: the default `build` agent and agents defined or overridden in the config
file's `agent` key. Built-in permissions and the other built-ins come with the agents issue.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from agentforge.config import Config

Mode = Literal["primary", "subagent", "all"]


class UnknownAgentError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Agent:
    name: str
    description: str = ""
    mode: Mode = "all"
    native: bool = False
    hidden: bool = False
    prompt: str | None = None
    model: str | None = None  # "provider/model"
    temperature: float | None = None
    top_p: float | None = None
    steps: int | None = None
    options: dict[str, Any] | None = None


BUILD = Agent(
    name="build",
    description="The default agent. Executes tools based on configured permissions.",
    mode="primary",
    native=True,
)


def _overlay(agent: Agent, raw: dict[str, Any]) -> Agent:
    steps = raw.get("steps", raw.get("maxSteps", agent.steps))
    return replace(
        agent,
        description=raw.get("description", agent.description),
        mode=raw.get("mode", agent.mode),
        hidden=bool(raw.get("hidden", agent.hidden)),
        prompt=raw.get("prompt", agent.prompt),
        model=raw.get("model", agent.model),
        temperature=raw.get("temperature", agent.temperature),
        top_p=raw.get("top_p", agent.top_p),
        steps=int(steps) if steps is not None else None,
        options=raw.get("options", agent.options),
    )


class AgentRegistry:
    def __init__(self, config: Config) -> None:
        agents: dict[str, Agent] = {BUILD.name: BUILD}
        configured: dict[str, Any] = getattr(config, "agent", None) or {}
        for name, raw in configured.items():
            if not isinstance(raw, dict):
                continue
            if raw.get("disable"):
                agents.pop(name, None)
                continue
            agents[name] = _overlay(agents.get(name, Agent(name=name)), raw)
        self._agents = agents
        self._default = self._pick_default(getattr(config, "default_agent", None))

    def _pick_default(self, configured: str | None) -> str:
        if configured:
            agent = self._agents.get(configured)
            if agent is None or agent.mode == "subagent" or agent.hidden:
                raise UnknownAgentError(f'default_agent "{configured}" is not a visible primary agent')
            return configured
        for agent in self._agents.values():
            if agent.mode != "subagent" and not agent.hidden:
                return agent.name
        raise UnknownAgentError("no primary agent is configured")

    @property
    def default_name(self) -> str:
        return self._default

    def get(self, name: str) -> Agent:
        agent = self._agents.get(name)
        if agent is None:
            available = ", ".join(sorted(a.name for a in self._agents.values() if not a.hidden))
            raise UnknownAgentError(f'Agent not found: "{name}". Available agents: {available}')
        return agent

    def list(self) -> list[Agent]:
        others = sorted((a for a in self._agents.values() if a.name != self._default), key=lambda a: a.name)
        return [self._agents[self._default], *others]
