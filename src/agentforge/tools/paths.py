"""Resolving the paths models give us, and the workspace guard (KERNEL 7.5).

Every tool works inside its session's workspace root (`ctx.directory`). A path that escapes it,
lexically (`../x`, an absolute path elsewhere) or through a symlink, goes through the
`external_directory` permission ask: it is used once the ask returns (approved by a rule or a
person) and refused when the ask raises. The directory where truncated outputs are saved is always
allowed, because the truncation hint tells the model to read or grep the files there.

Before any ask, the context's confinement (tools/confinement.py) applies: a confined tenant's hard
boundary refuses a path whose real location is outside it, and the fence refuses the roots that are
not the tenant's (other tenants', the server's data), whatever the rules or a person would answer.
This is the one check every path takes: the model's tool calls, and the files, `@` references and
commands a user's request names (the session builds a context for those too).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from agentforge.tools.base import OutsideWorkspaceError, PermissionRequest, ToolContext, ToolError
from agentforge.tools.confinement import WorkspaceBoundary
from agentforge.tools.fence import EXTERNAL_DIRECTORY, FencedPathError
from agentforge.tools.shell_command import static_path_arguments
from agentforge.tools.truncation import output_dir

PathKind = Literal["file", "directory", "auto"]


def workspace_root(ctx: ToolContext) -> Path:
    return ctx.directory.resolve()


def _given_root(ctx: ToolContext) -> Path:
    """The workspace as configured (absolute, symlinks kept), for lexical comparisons."""
    return Path(os.path.abspath(ctx.directory))


def _expand_home(ctx: ToolContext, raw: str) -> str:
    """`~` as the tool's processes see it: a tenant with a clean environment has its own HOME."""
    env = ctx.confinement.env
    if env.inherit or env.home is None or not (raw == "~" or raw.startswith("~/")):
        return os.path.expanduser(raw)
    return str(env.home) + raw[1:]


def absolute_path(ctx: ToolContext, raw: str | Path) -> Path:
    """The absolute, normalised form of a user/model path (relative to the workspace; `~` expanded).

    Symlinks are not resolved here: titles and messages show the path the way it was given.
    """
    expanded = _expand_home(ctx, str(raw))
    return Path(os.path.normpath(os.path.join(_given_root(ctx), expanded)))


def is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def display_path(ctx: ToolContext, path: Path) -> str:
    """The workspace-relative form for titles and permission patterns; absolute when outside."""
    for root in (_given_root(ctx), workspace_root(ctx)):
        if is_within(path, root):
            relative = path.relative_to(root).as_posix()
            return relative or "."
    return str(path)


def _inside_workspace(ctx: ToolContext, path: Path, real: Path) -> bool:
    root = workspace_root(ctx)
    lexically_inside = is_within(path, _given_root(ctx)) or is_within(path, root)
    return lexically_inside and is_within(real, root)


def _in_truncation_dir(ctx: ToolContext, real: Path) -> bool:
    return is_within(real, output_dir(ctx.data_dir).resolve())


def _resolve(path: Path, kind: PathKind) -> tuple[Path, Path]:
    """The real path (symlinks followed), and the directory an external-directory ask names:
    the path itself for a directory, its parent for a file."""
    try:
        real = path.resolve()
        is_directory = kind == "directory" or (kind == "auto" and real.is_dir())
    except (RuntimeError, OSError, ValueError) as exc:  # a symlink loop (RuntimeError until 3.13), NUL
        raise ToolError(f"Cannot use {path}: {exc}") from None
    return real, real if is_directory else real.parent


async def _check_boundary(boundary: WorkspaceBoundary, path: Path, real: Path, *, is_directory: bool) -> None:
    """Refuse a path outside a confined tenant's boundary, or a directory holding excluded files
    (other tenants' or the server's): a search there would walk into them."""
    if not boundary.contains(real):
        raise OutsideWorkspaceError(boundary.refusal(path, real))
    if is_directory and boundary.excluded:
        inside = await asyncio.to_thread(boundary.excluded_within, real)
        if inside is not None:
            raise OutsideWorkspaceError(
                f"Refusing to access {path}: it contains {inside}, which is not this tenant's. "
                "Work in a subdirectory that does not contain it."
            )


async def guard_path(ctx: ToolContext, raw: str | Path, *, kind: PathKind = "auto") -> Path:
    """Resolve `raw` and make sure the tool may touch it; returns the absolute path.

    `kind` says whether the external-directory permission names the path itself (a directory)
    or its parent (a file); "auto" looks at the filesystem.
    """
    path, _ = await guard_real(ctx, raw, kind=kind)
    return path


async def guard_real(ctx: ToolContext, raw: str | Path, *, kind: PathKind = "auto") -> tuple[Path, Path]:
    """`guard_path`, with the real location it checked (symlinks followed): what the file tools open
    (tools/pinned.py), so that a symlink put in the path afterwards cannot lead them elsewhere."""
    path = absolute_path(ctx, raw)
    # Resolving symlinks and checking for a directory touch the filesystem: keep them off the loop.
    real, directory = await asyncio.to_thread(_resolve, path, kind)
    boundary = ctx.confinement.boundary
    if boundary is not None:
        await _check_boundary(boundary, path, real, is_directory=real == directory)
    if _inside_workspace(ctx, path, real) or _in_truncation_dir(ctx, real):
        return path, real

    pattern = f"{directory.as_posix().rstrip('/')}/*"
    request = PermissionRequest(
        permission=EXTERNAL_DIRECTORY,
        patterns=[pattern],
        always=[pattern],
        metadata={"filepath": str(real), "parentDir": str(directory)},
    )
    fence = ctx.confinement.fence
    if fence.applies_to(request):
        refusal = await asyncio.to_thread(fence.refusal, request)
        if refusal is not None:
            raise FencedPathError(refusal)
    try:
        await ctx.ask(request)
    except OutsideWorkspaceError:
        # Nobody can approve outside paths here: say precisely where the path leads.
        raise OutsideWorkspaceError(_outside_message(ctx, path, real)) from None
    return path, real


async def guard_command_paths(
    ctx: ToolContext, command: str, workdir: Path, env: Mapping[str, str] | None = None
) -> None:
    """Guard the static paths a command names (arguments, redirections, interpreter code; variables
    from its own assignments and `env` expanded): "~" paths as the tenant's processes see them, the
    others relative to `workdir`. What only running the shell would tell (globs, substitutions,
    computed paths) cannot be checked before it runs: the sandbox confines that (tools/sandbox.py)."""
    # Parsing a long command (a heredoc holding a whole file) takes a while: off the event loop.
    for argument in await asyncio.to_thread(static_path_arguments, command, env):
        await guard_path(ctx, argument if argument.startswith("~") else workdir / argument)


def _outside_message(ctx: ToolContext, path: Path, real: Path) -> str:
    root = workspace_root(ctx)
    if is_within(path, _given_root(ctx)) or is_within(path, root):
        # Lexically inside, so a symlink is what leads out: say where it goes.
        return f"Refusing to access {path}: it resolves to {real}, which is outside the workspace {root}."
    return f"Refusing to access {path}: it is outside the workspace {root}."
