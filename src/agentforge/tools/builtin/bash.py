"""The `bash` tool (KERNEL 7.7): run a shell command in the workspace with live output.

The command runs with the tenant's process environment (tools/confinement.py: a tenant other than
`default` never sees the server's secrets), inside the tenant's OS sandbox (tools/sandbox.py), and
its `workdir` must be inside the tenant's boundary. A confined tenant without the server's
`tenancy.shell` grant never gets this tool (the session leaves it out of the tool table); `execute`
refuses it too, for a call that reaches it anyway.

Before it runs, the paths the command names (shell_paths.py: arguments, redirections, simple
variables, path literals in interpreter code) go through the workspace guard, so a path outside
asks `external_directory` (or is refused outright for a confined tenant); then the `bash`
permission is asked. In the sandbox the network is off unless the server grants it to the tenant
(`sandbox.network`); then the `network` permission decides, asked like `bash` (same patterns): a
rule that denies it runs the command offline, a person's rejection rejects the call.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import Field

from agentforge.tools.base import (
    PermissionDeniedError,
    PermissionRequest,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
)
from agentforge.tools.confinement import ShellNotAllowedError
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import guard_command_paths, guard_path
from agentforge.tools.process import KILL_GRACE_SECONDS, ProcessOutcome, run_process_group
from agentforge.tools.sandbox import CommandSandbox, SandboxRefusedError
from agentforge.tools.shell_command import permission_patterns
from agentforge.tools.shell_output import FinalOutput, ShellOutput
from agentforge.tools.truncation import TruncationLimits

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_METADATA_LENGTH = 30_000
METADATA_INTERVAL_SECONDS = 0.1
# KERNEL: the command is killed once the timeout has passed by this margin.
TIMEOUT_MARGIN_SECONDS = 0.1
SUPPORTED_SHELLS = ("bash", "zsh")

DESCRIPTION = f"""Executes a shell command with an optional timeout. Every call starts a fresh \
non-interactive shell: nothing (cwd, variables) carries over between calls.

Usage:
- The command runs in the workspace root unless workdir is given. Use workdir instead of \
`cd <dir> && <command>`.
- timeout is in milliseconds (default {DEFAULT_TIMEOUT_MS}, max {MAX_TIMEOUT_MS}); the whole \
process group is killed when it passes.
- stdin is closed: commands that wait for input fail instead of hanging. Use non-interactive flags.
- stdout and stderr are combined. Output over 50 KB or 2000 lines is cut to its tail; the full \
output is saved to a file whose path is given, which you can search with grep or read in parts.
- description: say in 5-10 words what the command does (e.g. "Run unit tests for parser").
- Quote paths that contain spaces. Chain dependent commands with &&; make independent calls in \
parallel instead.
- Prefer the read, glob, grep, edit and write tools over cat, find, grep, sed and echo > file.
- Commands may run in a sandbox: only the workspace and a private /tmp are writable, and the network \
may be off. "Read-only file system" or a failing name lookup means the sandbox stopped it: tell the \
user instead of working around it."""


class BashParams(ToolParams):
    command: str = Field(description="The command to execute")
    timeout: int | None = Field(
        default=None, gt=0, description="Optional timeout in milliseconds (max 600000)"
    )
    workdir: str | None = Field(
        default=None,
        description="The directory to run the command in (defaults to the workspace root)",
    )
    description: str = Field(description="Clear, concise description of what this command does in 5-10 words")


def default_shell() -> str:
    """The user's shell when it is bash or zsh (we rely on their `-c` semantics), else bash."""
    preferred = os.environ.get("SHELL", "")
    if os.path.basename(preferred) in SUPPORTED_SHELLS and os.access(preferred, os.X_OK):
        return preferred
    return shutil.which("bash") or "/bin/bash"


class _LivePreview:
    """Publishes the output so far on the tool part, at most every METADATA_INTERVAL_SECONDS."""

    def __init__(self, ctx: ToolContext, description: str, output: ShellOutput) -> None:
        self._ctx = ctx
        self._description = description
        self._output = output
        self._published = ""

    async def publish(self) -> None:
        text = self._output.tail(MAX_METADATA_LENGTH)
        self._published = text
        await self._ctx.metadata(self._description, {"output": text, "description": self._description})

    async def run(self) -> None:
        while True:
            await asyncio.sleep(METADATA_INTERVAL_SECONDS)
            if self._output.tail(MAX_METADATA_LENGTH) != self._published:
                await self.publish()


class BashTool(Tool[BashParams]):
    id = "bash"
    description = DESCRIPTION
    parameters = BashParams

    def __init__(
        self,
        limits: TruncationLimits | None = None,
        shell: str | None = None,
        kill_grace: float = KILL_GRACE_SECONDS,
    ) -> None:
        """`shell` overrides the shell choice; `kill_grace` is how long SIGTERM gets before SIGKILL."""
        self._limits = limits or TruncationLimits()
        self._shell = shell
        self._kill_grace = kill_grace

    async def execute(self, args: BashParams, ctx: ToolContext) -> ToolResult:
        confinement = ctx.confinement
        try:
            confinement.check_shell()
        except ShellNotAllowedError as exc:
            raise ToolError(str(exc)) from None
        workdir = await self._workdir(args, ctx)
        env = await ctx.process_env(workdir)
        await self._ask_permissions(args.command, workdir, env, ctx)
        sandbox = confinement.sandbox.command(network=await self._network(args.command, ctx))
        timeout_ms = min(args.timeout or DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS)
        output = ShellOutput(ctx.data_dir, self._limits, max_total_bytes=confinement.sandbox.output_bytes)
        preview = _LivePreview(ctx, args.description, output)
        await preview.publish()
        ticker = asyncio.create_task(preview.run())
        try:
            outcome = await self._run(args.command, workdir, env, sandbox, timeout_ms, output, ctx)
            final = await output.finish()
            if ticker.done():
                ticker.result()  # publishing progress failed: report it rather than drop it
        finally:
            ticker.cancel()
            output.close()
        return _result(args, outcome, final, timeout_ms)

    async def _run(
        self,
        command: str,
        workdir: Path,
        env: dict[str, str],
        sandbox: CommandSandbox,
        timeout_ms: int,
        output: ShellOutput,
        ctx: ToolContext,
    ) -> ProcessOutcome:
        try:
            return await run_process_group(
                [self._shell or default_shell(), "-c", command],
                cwd=workdir,
                env=env,
                time_limit=timeout_ms / 1000 + TIMEOUT_MARGIN_SECONDS,
                abort=ctx.abort,
                on_output=output.add,
                sandbox=sandbox,
                kill_grace=self._kill_grace,
            )
        except SandboxRefusedError as exc:
            raise ToolError(str(exc)) from None

    async def _workdir(self, args: BashParams, ctx: ToolContext) -> Path:
        if args.workdir is None:
            return ctx.directory
        workdir = await guard_path(ctx, args.workdir, kind="directory")
        if not await asyncio.to_thread(workdir.is_dir):
            raise ToolError(f"workdir {workdir} does not exist or is not a directory")
        return workdir

    async def _ask_permissions(
        self, command: str, workdir: Path, env: dict[str, str], ctx: ToolContext
    ) -> None:
        await guard_command_paths(ctx, command, workdir, env)
        patterns, always = permission_patterns(command)
        if patterns:
            await ctx.ask(PermissionRequest(permission="bash", patterns=patterns, always=always))

    async def _network(self, command: str, ctx: ToolContext) -> bool:
        """Whether this command gets the network in the sandbox: only if the tenant may have it at
        all (`sandbox.network`) and the `network` permission allows it. A rule's or a policy's deny
        runs it offline; a person's rejection rejects the call."""
        sandbox = ctx.confinement.sandbox
        if not sandbox.active or not sandbox.network:
            return False
        patterns, always = permission_patterns(command)
        request = PermissionRequest(permission="network", patterns=patterns or [command], always=always)
        try:
            await ctx.ask(request)
        except PermissionDeniedError as exc:
            if exc.blocks_loop:
                raise
            return False
        return True


def _result(args: BashParams, outcome: ProcessOutcome, final: FinalOutput, timeout_ms: int) -> ToolResult:
    text = final.text or "(no output)"
    notes: list[str] = []
    if outcome.ending == "timeout":
        notes.append(f"bash tool terminated command after exceeding timeout {timeout_ms} ms")
    elif outcome.ending == "aborted":
        notes.append("User aborted the command")
    if notes:
        text += "\n\n<bash_metadata>\n" + "\n".join(notes) + "\n</bash_metadata>"
    metadata: dict[str, Any] = {
        "output": text[-MAX_METADATA_LENGTH:],
        "exit": outcome.exit_code,
        "description": args.description,
        "truncated": final.truncated,
    }
    if final.output_path is not None:
        metadata["outputPath"] = final.output_path
    return ToolResult(title=args.description, output=text, metadata=metadata)
