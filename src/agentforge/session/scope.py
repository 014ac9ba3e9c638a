"""What one tenant runs with, as the session layer reads it: its effective settings, models, agents,
tools, confinement and MCP servers.

The composition root builds and caches one scope per tenant (runtime/scope.py: roots, overlays, the
confinement, MCP start-up); the session components receive the caller's scope and never look
tenants up themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentforge.agents.registry import AgentRegistry
from agentforge.config import Settings
from agentforge.llm.provider import ProviderCatalog
from agentforge.session.context.surroundings import SystemContext
from agentforge.session.context.system import context_for
from agentforge.tools.confinement import Confinement
from agentforge.tools.mcp import McpManager
from agentforge.tools.registry import ToolRegistry
from agentforge.tools.truncation import TruncationLimits

_SYSTEM_CONTEXTS = 1024


@dataclass(slots=True)
class TenantScope:
    tenant_id: str
    settings: Settings  # the tenant's: its workspace as `directory`, its data directory, its config
    catalog: ProviderCatalog
    agents: AgentRegistry
    tools: ToolRegistry  # built-ins, plugin tools, then the tenant's MCP tools
    confinement: Confinement  # environment, boundary, fence and command grant of its tools
    mcp: McpManager | None = None
    # By session directory: none of a context's inputs change while the scope lives (a changed
    # config makes a new scope), and building one costs a platformdirs look-up per turn.
    _system_contexts: dict[str, SystemContext] = field(default_factory=dict, repr=False, compare=False)

    @property
    def limits(self) -> TruncationLimits:
        output = self.settings.config.tool_output
        return TruncationLimits(max_lines=output.max_lines, max_bytes=output.max_bytes)

    @property
    def max_retries(self) -> int:
        return self.settings.config.retry.max_attempts

    def system_context(self, directory: str) -> SystemContext:
        """Where a session in `directory` runs, for its system prompt (session/context/system.py)."""
        context = self._system_contexts.get(directory)
        if context is None:
            if len(self._system_contexts) >= _SYSTEM_CONTEXTS:
                self._system_contexts.clear()
            context = context_for(self.settings, directory, self.confinement.boundary)
            self._system_contexts[directory] = context
        return context

    async def close(self) -> None:
        if self.mcp is not None:
            await self.mcp.close()
