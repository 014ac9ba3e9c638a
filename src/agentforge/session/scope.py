"""What one tenant runs with, as the session layer reads it: its effective settings, models, agents,
tools, confinement and MCP servers.

The composition root builds and caches one scope per tenant (runtime/scope.py: roots, overlays, the
confinement, MCP start-up); the session components receive the caller's scope and never look
tenants up themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentforge.agents.registry import AgentRegistry
from agentforge.config import Settings
from agentforge.llm.provider import ProviderCatalog
from agentforge.tools.confinement import Confinement
from agentforge.tools.mcp import McpManager
from agentforge.tools.registry import ToolRegistry
from agentforge.tools.truncation import TruncationLimits


@dataclass(slots=True)
class TenantScope:
    tenant_id: str
    settings: Settings  # the tenant's: its workspace as `directory`, its data directory, its config
    catalog: ProviderCatalog
    agents: AgentRegistry
    tools: ToolRegistry  # built-ins, plugin tools, then the tenant's MCP tools
    confinement: Confinement  # environment, boundary, fence and command grant of its tools
    mcp: McpManager | None = None

    @property
    def limits(self) -> TruncationLimits:
        output = self.settings.config.tool_output
        return TruncationLimits(max_lines=output.max_lines, max_bytes=output.max_bytes)

    @property
    def max_retries(self) -> int:
        return self.settings.config.retry.max_attempts

    async def close(self) -> None:
        if self.mcp is not None:
            await self.mcp.close()
