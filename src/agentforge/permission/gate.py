"""The permission side of one turn: whose session it is and which rules apply, bound to the service.

A tool call's `ask` (`for_call`) evaluates the rules and asks a person when they say so. What a user's
own request reads or runs (attached files, `@` references, the shell route, command snippets) is
checked against the same rules by `for_request`, but nobody can be asked in the middle of a request:
what would be asked is refused, so the request answers 400 before anything is stored. The paths both
check are guarded by the tool context's confinement first (tools/paths.py: boundary and fence).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentforge.permission.rules import Ruleset, disabled_tools
from agentforge.permission.service import PermissionService
from agentforge.tools.base import (
    AskPermission,
    OutsideWorkspaceError,
    PermissionDeniedError,
    PermissionRequest,
)
from agentforge.tools.fence import EXTERNAL_DIRECTORY


class ApprovalNeededError(PermissionDeniedError):
    """A user's request needs what only a person's approval would allow; a request cannot wait."""

    refused_by = "rule"


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

    def for_request(self) -> AskPermission:
        """The `ask` of what a user's request does itself: allowed when the rules (or the session's
        `always` approvals) allow it, refused when they deny it or would ask a person."""

        async def ask(request: PermissionRequest) -> None:
            if await self.service.allowed_now(self.tenant_id, self.session_id, request, self.ruleset):
                return
            if request.permission == EXTERNAL_DIRECTORY:
                # guard_path names the path and the workspace in the message the caller sees.
                raise OutsideWorkspaceError(f"Refusing to access {', '.join(request.patterns)}")
            raise ApprovalNeededError(
                f"`{request.permission}` of {', '.join(request.patterns)} needs a person's approval, which "
                f"a request cannot wait for; a `{request.permission}` rule that allows it lets it through."
            )

        return ask

    def disabled(self, tool_names: Iterable[str]) -> set[str]:
        return disabled_tools(tool_names, self.ruleset)

    def reject_waiting(self) -> int:
        """Reject the session's requests still waiting for a person (the turn is being abandoned)."""
        return self.service.reject_session(self.session_id)
