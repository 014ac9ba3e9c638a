"""A workspace, a data dir and a ToolContext whose permission and metadata seams record calls.

The context is the local user's (`unconfined()`) unless a test sets `confinement`; `services` are the
ones a test lends the tool (none by default)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentforge.model.ids import ascending
from agentforge.testing.tools import refuse_outside, unconfined
from agentforge.tools import filetime
from agentforge.tools.base import AskPermission, PermissionRequest, Tool, ToolContext, ToolResult
from agentforge.tools.confinement import Confinement, ProcessEnv, WorkspaceBoundary
from agentforge.tools.execute import run_tool
from agentforge.tools.fence import Fence
from agentforge.tools.process import run_process_group
from agentforge.tools.sandbox import UNSANDBOXED, CommandSandbox
from agentforge.tools.services import NO_SERVICES, ToolServices
from agentforge.tools.truncation import TruncationLimits


@dataclass
class Harness:
    workspace: Path
    data_dir: Path
    asks: list[PermissionRequest] = field(default_factory=list)
    updates: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    confinement: Confinement = field(default_factory=unconfined)
    services: ToolServices = NO_SERVICES
    approve_external: bool = False
    session_id: str = field(default_factory=lambda: ascending("ses"))
    limits: TruncationLimits = field(default_factory=TruncationLimits)
    ask_override: AskPermission | None = None  # answers asks instead of the default below

    async def _ask(self, request: PermissionRequest) -> None:
        """Record the request; outside paths are refused as without a permission service, unless
        the test approves them."""
        self.asks.append(request)
        if not self.approve_external:
            await refuse_outside(request)

    async def _metadata(self, title: str | None, metadata: dict[str, Any]) -> None:
        self.updates.append((title, dict(metadata)))

    def confine(self) -> None:
        """Make the context a confined tenant's: a hard boundary at the workspace."""
        self.confinement = Confinement(
            env=ProcessEnv(),
            boundary=WorkspaceBoundary(workspace=self.workspace.resolve()),
            fence=Fence(),
            sandbox=UNSANDBOXED,
            shell_denied=None,
        )

    def context(self) -> ToolContext:
        return ToolContext(
            session_id=self.session_id,
            message_id=ascending("msg"),
            call_id="call_1",
            agent="build",
            directory=self.workspace,
            data_dir=self.data_dir,
            confinement=self.confinement,
            ask=self.ask_override or self._ask,
            services=self.services,
            metadata=self._metadata,
        )

    async def run(self, tool: Tool[Any], /, **raw_input: Any) -> ToolResult:
        return await run_tool(tool, raw_input, self.context(), limits=self.limits)

    def asked(self, permission: str) -> list[PermissionRequest]:
        return [request for request in self.asks if request.permission == permission]


def approved_after(change: Callable[[], object]) -> AskPermission:
    """An ask answered yes once `change` ran: someone changes the files while the tool waits for
    approval."""

    async def ask(request: PermissionRequest) -> None:
        change()

    return ask


def swap_for_symlink(path: Path, target: Path) -> None:
    """What a command running beside a tool call may do: move what is at `path` aside and put a
    symlink to `target` there."""
    path.rename(path.with_name(path.name + ".moved"))
    path.symlink_to(target)


def src_swapped_while_asked(harness: Harness, outside: Path) -> None:
    """The workspace's `src` (holding mine.txt) becomes a symlink to `outside` (holding
    secret-name.txt, "not yours") while the tool waits for approval."""
    (harness.workspace / "src").mkdir()
    (harness.workspace / "src" / "mine.txt").write_text("needle = 'mine'\n")
    outside.mkdir()
    (outside / "secret-name.txt").write_text("needle = 'not yours'\n")
    harness.ask_override = approved_after(lambda: swap_for_symlink(harness.workspace / "src", outside))


def as_seen(path: Path) -> filetime.Seen:
    """`path` as a read of it would note it now: where it leads, its fingerprint."""
    real = path.resolve()
    return filetime.seen_as(real, os.stat(real))


def assert_fresh(session_id: str, path: Path) -> None:
    """Whether the session's read of `path` still stands (the check edit and write make)."""
    filetime.assert_fresh_as(session_id, path, as_seen(path))


def text_of(path: str | Path) -> str:
    """File content, for assertions (a plain function: test bodies stay free of blocking calls)."""
    return Path(path).read_text()


def real(path: Path) -> Path:
    return path.resolve()


def size_of(path: Path) -> int:
    return path.stat().st_size


async def run_command(jail: CommandSandbox, command: str, cwd: Path) -> tuple[int | None, str]:
    """`bash -c command` as the bash tool runs it (`run_process_group`): its exit code, its output."""
    chunks: list[bytes] = []

    async def collect(chunk: bytes) -> None:
        chunks.append(chunk)

    outcome = await run_process_group(
        ["bash", "-c", command],
        cwd=cwd,
        env=dict(os.environ),
        time_limit=30,
        abort=asyncio.Event(),
        on_output=collect,
        sandbox=jail,
    )
    return outcome.exit_code, b"".join(chunks).decode(errors="replace")
