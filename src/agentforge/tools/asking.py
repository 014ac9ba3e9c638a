"""What a tool asks the permission seam, and how refusals look to the model.

A leaf module: the confinement (tools/confinement.py) and the fence (tools/fence.py) refuse with these
errors, and the tool context (tools/base.py) carries the `ask` seam typed here, so neither of them
depends on the other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


class ToolError(Exception):
    """A failure the model can act on: its message becomes the tool part's `error`."""


class PermissionDeniedError(ToolError):
    """A permission rule or a person said no. The loop stops after this step when `blocks_loop`.

    `refused_by` names what refused without asking anyone ("rule", a policy's name, "fence",
    "workspace"); it goes into the failed tool part's metadata, so the audit log records the denial.
    A person's answer is recorded with the permission reply instead (None here).
    """

    blocks_loop = True
    refused_by: str | None = None


class OutsideWorkspaceError(PermissionDeniedError):
    """A path outside the workspace that nobody may approve here."""

    refused_by = "workspace"


@dataclass(slots=True)
class PermissionRequest:
    """What a tool asks permission for (KERNEL 7.4): a permission key and the concrete patterns."""

    permission: str
    patterns: list[str]
    always: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


# The permission seam: returns when the call may go on, raises PermissionDeniedError when it may not.
AskPermission = Callable[[PermissionRequest], Awaitable[None]]
