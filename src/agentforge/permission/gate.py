"""The permission side of one turn: whose session it is and which rules apply, bound to the service."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentforge.permission.rules import Ruleset, disabled_tools
from agentforge.permission.service import PermissionService
from agentforge.tools.base import AskPermission, PermissionRequest


@dataclass(frozen=True, slots=True)
class TurnPermissions:
    service: PermissionService
    tenant_id: str
    session_id: str
    ruleset: Ruleset

    def for_call(self, message_id: str, call_id: str) -> AskPermission:
        """The `ask` a tool call's context gets: requests name the call they hold up."""

        async def ask(request: PermissionRequest) -> None:
            await self.service.ask(
                self.tenant_id, self.session_id, request, self.ruleset, message_id=message_id, call_id=call_id
            )

        return ask

    def disabled(self, tool_names: Iterable[str]) -> set[str]:
        return disabled_tools(tool_names, self.ruleset)

    def reject_waiting(self) -> int:
        """Reject the session's requests still waiting for a person (the turn is being abandoned)."""
        return self.service.reject_session(self.session_id)
