"""Agents (KERNEL 8.1): a name, a mode, an optional prompt, model, temperature and step limit.

This is the kernel's subset: the default `build` agent and agents defined or overridden in the config
file's `agent` key. The other built-ins come with the agents issue.

Each agent carries its permission rules in two layers (KERNEL 8.2, 7.3): its built-in defaults, then
the config's `permission` followed by the agent's own config `permission`. The config layer may only
narrow the defaults (see `permission.rules`); session and per-prompt rules are stacked on top per turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from agentforge.config import Config, ConfigError
from agentforge.permission.defaults import agent_defaults
from agentforge.permission.rules import InvalidRulesError, Rule, Ruleset, from_config, merge
from agentforge.tools.truncation import output_dir

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
    permission: Ruleset = field(default_factory=Ruleset)


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


def _raw_of(configured: dict[str, Any], name: str) -> dict[str, Any]:
    raw = configured.get(name)
    return raw if isinstance(raw, dict) else {}


def _config_rules(value: Any, where: str) -> list[Rule]:
    try:
        return from_config(value)
    except InvalidRulesError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _with_permissions(
    agent: Agent, global_rules: list[Rule], raw: dict[str, Any], data_dir: Path | None
) -> Agent:
    truncation_dir = output_dir(data_dir) if data_dir is not None else None
    own = _config_rules(raw.get("permission"), f"agent.{agent.name}.permission")
    return replace(agent, permission=merge(agent_defaults(agent.name, truncation_dir), [*global_rules, *own]))


class AgentRegistry:
    """`data_dir` locates the truncated-output directory, which every agent may read."""

    def __init__(self, config: Config, *, data_dir: Path | None = None) -> None:
        agents: dict[str, Agent] = {BUILD.name: BUILD}
        configured: dict[str, Any] = getattr(config, "agent", None) or {}
        for name, raw in configured.items():
            if not isinstance(raw, dict):
                continue
            if raw.get("disable"):
                agents.pop(name, None)
                continue
            agents[name] = _overlay(agents.get(name, Agent(name=name)), raw)
        global_rules = _config_rules(getattr(config, "permission", None), "permission")
        self._agents = {
            name: _with_permissions(agent, global_rules, _raw_of(configured, name), data_dir)
            for name, agent in agents.items()
        }
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
