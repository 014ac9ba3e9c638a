"""The permission side of one turn: whose session it is and which rules apply, bound to the service."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from agentforge.permission.errors import DeniedError
from agentforge.permission.fence import Fence
from agentforge.permission.rules import Ruleset, disabled_tools
from agentforge.permission.service import PermissionService
from agentforge.tools.base import AskPermission, PermissionRequest


@dataclass(frozen=True, slots=True)
class TurnPermissions:
    service: PermissionService
    tenant_id: str
    session_id: str
    ruleset: Ruleset
    fence: Fence = field(default_factory=Fence)  # paths no rule or person may open to this tenant

    def for_call(self, message_id: str, call_id: str) -> AskPermission:
        """The `ask` a tool call's context gets: requests name the call they hold up. A request for
        a fenced path is refused before any rule or person sees it."""

        async def ask(request: PermissionRequest) -> None:
            if self.fence.applies_to(request):
                refusal = await asyncio.to_thread(self.fence.refusal, request)
                if refusal is not None:
                    raise DeniedError(refusal, refused_by="fence")
            await self.service.ask(
                self.tenant_id, self.session_id, request, self.ruleset, message_id=message_id, call_id=call_id
            )

        return ask

    def disabled(self, tool_names: Iterable[str]) -> set[str]:
        return disabled_tools(tool_names, self.ruleset)

    def reject_waiting(self) -> int:
        """Reject the session's requests still waiting for a person (the turn is being abandoned)."""
        return self.service.reject_session(self.session_id)
