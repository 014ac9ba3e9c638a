"""The agents a server knows (KERNEL 8): the built-ins, overridden or extended by the config file's
`agent.<name>` entries and by Markdown agent files, minus those marked `disable`.

Sources stack per agent name, later winning key by key: the config file's entry, then
`<config dir>/agents/<name>.md`, then `<workspace>/.agentforge/agents/<name>.md`. A name no built-in has
is a new agent (mode `all` unless set).

Each agent carries its permission rules in two layers (KERNEL 8.2, 7.3): its built-in defaults, then
the config's `permission` followed by the agent's own `permission`. The config layer may only narrow
the defaults (see `permission.rules`); session and per-prompt rules are stacked on top per turn.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentforge.agents.agent import Agent, AgentInfo, UnknownAgentError
from agentforge.agents.builtin import BUILTIN_AGENTS
from agentforge.agents.config import AgentConfig, parse_agent_config
from agentforge.agents.markdown import MarkdownDefinition, agent_entry, read_definitions
from agentforge.config import Config, ConfigError, Settings, deep_merge, user_config_file
from agentforge.permission.defaults import agent_defaults
from agentforge.permission.rules import InvalidRulesError, Rule, from_config, merge
from agentforge.tools.truncation import output_dir

__all__ = ["Agent", "AgentInfo", "AgentRegistry", "UnknownAgentError", "agent_directories", "load_agents"]

AGENTS_DIR = "agents"
WORKSPACE_DIR = ".agentforge"
PLANS_DIR = "plans"


def agent_directories(workspace: Path) -> list[Path]:
    """Where Markdown agent files are looked for, lowest precedence first."""
    return [user_config_file().parent / AGENTS_DIR, workspace / WORKSPACE_DIR / AGENTS_DIR]


def load_agents(settings: Settings) -> AgentRegistry:
    """The registry for a server, with the Markdown agent files read. Blocking file IO: run it in a
    thread once the event loop is serving."""
    files = [d for directory in agent_directories(settings.directory) for d in read_definitions(directory)]
    return AgentRegistry(settings.config, data_dir=settings.data_dir, files=files)


class AgentRegistry:
    """`data_dir` locates the truncated-output directory, which every agent may read, and the plans
    directory the plan agent may write to. `files` are Markdown agent files, lowest precedence first."""

    def __init__(
        self, config: Config, *, data_dir: Path | None = None, files: Sequence[MarkdownDefinition] = ()
    ) -> None:
        configured = _configured(config, files)
        agents = {agent.name: agent for agent in BUILTIN_AGENTS}
        for name, settings in configured.items():
            if settings.disable:
                agents.pop(name, None)
            else:
                agents[name] = _overlay(agents.get(name, Agent(name=name)), settings)
        global_rules = _config_rules(getattr(config, "permission", None), "permission")
        self._agents = {
            name: _with_permissions(agent, global_rules, configured.get(name), data_dir)
            for name, agent in agents.items()
        }
        self._default = self._pick_default(config.default_agent)

    def _pick_default(self, configured: str | None) -> str:
        if configured:
            agent = self._agents.get(configured)
            if agent is None:
                raise ConfigError(f'default_agent "{configured}" is not an agent (known: {self._names()})')
            if not agent.is_primary or agent.hidden:
                raise ConfigError(f'default_agent "{configured}" must be a visible primary agent')
            return configured
        for agent in self._agents.values():
            if agent.is_primary and not agent.hidden:
                return agent.name
        raise ConfigError("no visible primary agent is left: every such agent is disabled")

    def _names(self) -> str:
        return ", ".join(sorted(a.name for a in self._agents.values() if not a.hidden))

    @property
    def default_name(self) -> str:
        return self._default

    def get(self, name: str) -> Agent:
        agent = self._agents.get(name)
        if agent is None:
            raise UnknownAgentError(f'Agent not found: "{name}". Available agents: {self._names()}')
        return agent

    def list(self) -> list[Agent]:
        """Every agent, hidden ones included: the default first, then by name."""
        others = sorted((a for a in self._agents.values() if a.name != self._default), key=lambda a: a.name)
        return [self._agents[self._default], *others]

    def subagents(self) -> builtins.list[Agent]:
        """Agents the task tool may run, by name: not primary-only and not hidden."""
        return sorted(
            (a for a in self._agents.values() if a.mode != "primary" and not a.hidden), key=lambda a: a.name
        )


def _configured(config: Config, files: Iterable[MarkdownDefinition]) -> dict[str, AgentConfig]:
    """Per agent name, its settings from every source stacked (each source validated on its own first,
    so an error names the file or config key it is in)."""
    entries: dict[str, dict[str, Any]] = {}
    raw_agents = getattr(config, "agent", None) or {}
    if not isinstance(raw_agents, dict):
        raise ConfigError("agent: must be an object of agent names to settings")
    for name, raw in raw_agents.items():
        parse_agent_config(raw, f"agent.{name}")
        entries[name] = dict(raw)
    for definition in files:
        entry = agent_entry(definition)
        parse_agent_config(entry, str(definition.path))
        entries[definition.name] = deep_merge(entries.get(definition.name, {}), entry)
    return {name: parse_agent_config(entry, f"agent.{name}") for name, entry in entries.items()}


def _overlay(agent: Agent, settings: AgentConfig) -> Agent:
    """The fields `settings` sets, over the agent's own."""
    given = settings.model_fields_set

    def pick(name: str, current: Any) -> Any:
        return getattr(settings, name) if name in given else current

    steps = settings.step_limit
    options = settings.provider_options
    return replace(
        agent,
        description=pick("description", agent.description) or "",
        mode=pick("mode", agent.mode) or agent.mode,
        hidden=bool(pick("hidden", agent.hidden)),
        prompt=pick("prompt", agent.prompt),
        model=pick("model", agent.model),
        variant=pick("variant", agent.variant),
        color=pick("color", agent.color),
        temperature=pick("temperature", agent.temperature),
        top_p=pick("top_p", agent.top_p),
        steps=steps if steps is not None else agent.steps,
        options={**(agent.options or {}), **options} if options else agent.options,
    )


def _config_rules(value: Any, where: str) -> list[Rule]:
    try:
        return from_config(value)
    except InvalidRulesError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _with_permissions(
    agent: Agent, global_rules: list[Rule], settings: AgentConfig | None, data_dir: Path | None
) -> Agent:
    truncation_dir = output_dir(data_dir) if data_dir is not None else None
    plans_dir = data_dir / PLANS_DIR if data_dir is not None else None
    own = _config_rules(settings.permission_value if settings else None, f"agent.{agent.name}.permission")
    defaults = agent_defaults(agent.name, truncation_dir, plans_dir)
    return replace(agent, permission=merge(defaults, [*global_rules, *own]))
