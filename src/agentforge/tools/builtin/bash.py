"""The `bash` tool (KERNEL 7.7): run a shell command in the workspace with live output.

The command runs with the tenant's process environment (tools/confinement.py: a tenant other than
`default` never sees the server's secrets) and its `workdir` must be inside the tenant's boundary.
A confined tenant without the server's `tenancy.shell` grant never gets this tool (the session leaves
it out of the tool table); `execute` refuses it too, for a call that reaches it anyway.
The command text itself is not sandboxed: only literal path arguments of file commands are checked
(see confinement.py for what that leaves open).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import Field

from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.confinement import ShellNotAllowedError, confinement_of, tool_process_env
from agentforge.tools.params import ToolParams
from agentforge.tools.paths import guard_path
from agentforge.tools.process import KILL_GRACE_SECONDS, ProcessOutcome, run_process_group
from agentforge.tools.shell_command import permission_patterns, static_path_arguments
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
- Prefer the read, glob, grep, edit and write tools over cat, find, grep, sed and echo > file."""


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
        try:
            confinement_of(ctx).check_shell()
        except ShellNotAllowedError as exc:
            raise ToolError(str(exc)) from None
        workdir = await self._workdir(args, ctx)
        await self._ask_permissions(args.command, workdir, ctx)
        timeout_ms = min(args.timeout or DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS)

        env = await tool_process_env(ctx, workdir)
        output = ShellOutput(ctx.data_dir, self._limits)
        preview = _LivePreview(ctx, args.description, output)
        await preview.publish()
        ticker = asyncio.create_task(preview.run())
        try:
            outcome = await run_process_group(
                [self._shell or default_shell(), "-c", args.command],
                cwd=workdir,
                env=env,
                time_limit=timeout_ms / 1000 + TIMEOUT_MARGIN_SECONDS,
                abort=ctx.abort,
                on_output=output.add,
                kill_grace=self._kill_grace,
            )
            final = await output.finish()
            if ticker.done():
                ticker.result()  # publishing progress failed: report it rather than drop it
        finally:
            ticker.cancel()
            output.close()
        return _result(args, outcome, final, timeout_ms)

    async def _workdir(self, args: BashParams, ctx: ToolContext) -> Path:
        if args.workdir is None:
            return ctx.directory
        workdir = await guard_path(ctx, args.workdir, kind="directory")
        if not await asyncio.to_thread(workdir.is_dir):
            raise ToolError(f"workdir {workdir} does not exist or is not a directory")
        return workdir

    async def _ask_permissions(self, command: str, workdir: Path, ctx: ToolContext) -> None:
        for argument in static_path_arguments(command):
            # "~" paths are expanded by the guard; the others are relative to the workdir.
            await guard_path(ctx, argument if argument.startswith("~") else workdir / argument)
        patterns, always = permission_patterns(command)
        if patterns:
            await ctx.ask(PermissionRequest(permission="bash", patterns=patterns, always=always))


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
