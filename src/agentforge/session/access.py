"""What a user's own request may read and run: the files it attaches, the `@` references of a
command or a subagent's prompt, and the commands of the shell route and of command snippets.

Each goes through the check a tool call takes (tools/paths.py, tools/builtin/read.py: the tenant's
boundary, its fence, the workspace, then the rules), with the caller's tenant confinement and the
rules of the request's agent and session. Nobody can be asked in the middle of a request, so what a
person would have to approve is refused too (permission/gate.py `for_request`). A refusal is an
InvalidInputError (400) raised before anything of the request is stored; a tenant that may not run
commands at all gets ShellNotAllowedError (403).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentforge.agents.registry import Agent
from agentforge.model.session import PermissionRule, Session
from agentforge.permission.gate import TurnPermissions
from agentforge.permission.rules import Ruleset, from_tools_map, merge
from agentforge.permission.service import PermissionService
from agentforge.session.errors import InvalidInputError
from agentforge.tools.base import ToolContext, ToolError
from agentforge.tools.builtin.read import readable
from agentforge.tools.confinement import Confinement
from agentforge.tools.paths import guard_command_paths, guard_path
from agentforge.tools.services import NO_SERVICES

# The call id of the context a request's own reads run in: no tool call holds them up.
REQUEST_CALL_ID = "user-request"


def turn_rules(agent: Agent, session: Session, tools: dict[str, bool] | None = None) -> Ruleset:
    """The rules of a turn, most trusted first: the agent's (defaults, then config), the session's,
    then the prompt's `tools` map. Each layer may only narrow the ones before."""
    session_rules: list[PermissionRule] = session.permission or []
    return merge(agent.permission, session_rules, from_tools_map(tools))


@dataclass(frozen=True, slots=True)
class RequestAccess:
    """The checks of one request, bound to a tool context built for it."""

    context: ToolContext

    @classmethod
    def of(
        cls,
        *,
        permissions: PermissionService,
        tenant_id: str,
        confinement: Confinement,
        data_dir: Path,
        session: Session,
        message_id: str,
        agent: Agent,
        tools: dict[str, bool] | None = None,
    ) -> RequestAccess:
        rules = TurnPermissions(permissions, tenant_id, session.id, turn_rules(agent, session, tools))
        context = ToolContext(
            session_id=session.id,
            message_id=message_id,
            call_id=REQUEST_CALL_ID,
            agent=agent.name,
            directory=Path(session.directory),
            data_dir=data_dir,
            confinement=confinement,
            ask=rules.for_request(),
            services=NO_SERVICES,
        )
        return cls(context)

    @property
    def directory(self) -> Path:
        return self.context.directory

    async def path(self, raw: str | Path) -> Path:
        """`raw` (relative to the session directory, `~` as the tenant's processes see it) as an
        absolute path, when the request may name it at all."""
        try:
            return await guard_path(self.context, raw)
        except ToolError as exc:
            raise InvalidInputError(str(exc)) from None

    async def readable(self, raw: str | Path) -> tuple[Path, Path]:
        """`raw` as an absolute path and where it was checked to lead (what to open: tools/pinned.py),
        when the request may read it (the read tool's check)."""
        try:
            return await readable(self.context, raw)
        except ToolError as exc:
            raise InvalidInputError(str(exc)) from None

    async def command(self, command: str) -> None:
        """Whether the request may run `command` in the session directory (checked when the
        session was created, as the bash tool's default workdir): the tenant may run commands at
        all (ShellNotAllowedError otherwise), and the command's literal path arguments pass the
        path check (tools/confinement.py says what that leaves open)."""
        self.context.confinement.check_shell()
        try:
            await guard_command_paths(self.context, command, self.directory)
        except ToolError as exc:
            raise InvalidInputError(str(exc)) from None
