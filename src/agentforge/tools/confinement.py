"""How far a tenant's tools reach (ARCHITECTURE "Tenancy": each tenant's tools run inside its
workspace root): the environment of the processes they start, and the directories their paths may
lead to.

Environment: every process a tool starts (bash, the user's shell route, `!`cmd`` snippets of
commands, MCP stdio servers) gets `ProcessEnv.build(...)`. A tenant other than `default` gets a clean
environment: a minimal safe base (PATH, LANG, LC_ALL, TZ), HOME = its workspace, TMPDIR = its
private temp dir, TERM=dumb, then the variables its config declares (`shell_env`) and those plugins
add. Provider keys, database URLs and AGENTFORGE_* settings of the server never reach it. The tenant
`default` (local mode, the user's own machine) inherits the server's environment unless
`tools.inherit_env` is false. MCP stdio servers never inherit it, whatever the tenant (mcp_config).

Boundary: a tenant other than `default` has a hard `WorkspaceBoundary`. A path whose real location
(symlinks followed) is outside its workspace, its own private directories (tool output, plans, temp)
and the directories the server config grants it (`tenancy.external_directories`) is refused at
once: the `external_directory` permission cannot widen it, since the tenant's own user answers that
ask. Inside the boundary, paths outside the session's directory still go through the ask.

Fence: every tenant, `default` too, is fenced (tools/fence.py) from the roots that are not its own
(the other tenants' roots, the server's data and database), whatever a rule or a person would say.

One confinement per tenant, built from its scope (runtime/scope.py `tenant_confinement`), and a
required field of every tool context (tools/base.py): no tool runs, and no path a user names is read,
without one.

Commands: bash, the shell route, command snippets and MCP stdio servers start only through a
`CommandSandbox` (tools/sandbox.py): with the sandbox, a tenant's command sees its workspace as the
only writable place, not the other tenants' roots nor the server's data, and no network unless
allowed. A confined tenant runs commands only with the server's `tenancy.shell` grant and, unless
the operator turned the sandbox off, only inside it: `Confinement.check_shell` refuses them
otherwise, and the sandbox refuses them again at start (`SandboxRefusedError`).

What the static checks do NOT do: see everything a command touches. The bash tool parses the
command (tools/shell_paths.py) and asks `external_directory` for the paths it can see (arguments,
redirections, simple variables, path literals in interpreter code), but a path computed at run time
is invisible to it, and a path is checked before the command uses it (a symlink swapped in between
is not seen). The sandbox is what confines arbitrary commands; the checks give the user a say first.
The server's own file tools open what the check saw, whatever was swapped in since (tools/pinned.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from agentforge.tools.fence import Fence
from agentforge.tools.sandbox import Sandbox

# Variables a clean environment takes over from the server: needed to find programs and to
# decode text the same way, and secret-free.
SAFE_INHERITED = ("PATH", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True, slots=True)
class ProcessEnv:
    """The environment child processes of one tenant's tools start with.

    `inherit`: start from the server's environment (the default tenant in local mode). Otherwise
    start clean, with HOME = `home` and TMPDIR = `tmpdir`. `declared` is the config's `shell_env`.
    """

    inherit: bool = True
    home: Path | None = None
    tmpdir: Path | None = None
    declared: Mapping[str, str] = field(default_factory=dict)

    def build(
        self, additions: Mapping[str, str] | None = None, *, server_env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The full environment: the base, then `declared`, then `additions` (plugins, an MCP
        server's `environment`), and TERM=dumb (no pagers or colour codes in captured output)."""
        source = os.environ if server_env is None else server_env
        base = dict(source) if self.inherit else self._clean_base(source)
        return {**base, **self.declared, **(additions or {}), "TERM": "dumb"}

    def clean(self) -> ProcessEnv:
        """This environment without the server's variables (MCP servers never inherit them)."""
        return replace(self, inherit=False)

    def _clean_base(self, source: Mapping[str, str]) -> dict[str, str]:
        base = {name: source[name] for name in SAFE_INHERITED if name in source}
        base.setdefault("PATH", os.defpath)
        if self.home is not None:
            base["HOME"] = str(self.home)
        if self.tmpdir is not None:
            base["TMPDIR"] = str(self.tmpdir)
        return base


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True, slots=True)
class WorkspaceBoundary:
    """The directories a confined tenant's tools may reach at all: its workspace first, then its
    private directories and the extra directories the server grants it. `excluded`: directories
    inside the workspace that are not its own (the server's data and the other tenants' roots, when
    the workspace is a parent of theirs); the `also` directories are carved back out of them. All
    resolved (real) paths."""

    workspace: Path
    also: tuple[Path, ...] = ()
    excluded: tuple[Path, ...] = ()

    def contains(self, real: Path) -> bool:
        if any(_within(real, root) for root in self.also):
            return True
        return _within(real, self.workspace) and not any(_within(real, root) for root in self.excluded)

    def excluded_within(self, directory: Path) -> Path | None:
        """An existing excluded directory strictly inside `directory` (a search there would walk
        into it), or None. Touches the filesystem: call it off the event loop."""
        for root in self.excluded:
            if root != directory and root.is_relative_to(directory) and root.exists():
                return root
        return None

    def refusal(self, path: Path, real: Path) -> str:
        """The tool error for a path outside: what the model needs to change course."""
        leads_to = f" (it resolves to {real})" if real != path else ""
        return (
            f"Refusing to access {path}{leads_to}: it is outside this tenant's workspace "
            f"{self.workspace}. Work with files inside the workspace."
        )


class ShellNotAllowedError(Exception):
    """A tenant may not run commands: a confined one without the server's `tenancy.shell` grant, or
    one whose commands need the OS sandbox where there is none (`reason` says so)."""

    def __init__(self, tenant_id: str, reason: str | None = None) -> None:
        super().__init__(
            f"Running commands is disabled for tenant {tenant_id!r}: "
            + (
                reason
                or "the server operator has not granted it (tenancy.shell). Granted tenants' "
                "commands run inside the OS sandbox."
            )
        )
        self.tenant_id = tenant_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Confinement:
    """A tenant's process environment, its hard workspace boundary (None: only the permission asks
    keep its tools in the workspace, as for the local user), the fence no permission opens, the
    sandbox its commands run in, and whether it may run commands (bash, the shell route, command
    snippets): `shell_denied` names the tenant when it may not, `shell_refusal` says why when it is
    not the missing grant. Every field that decides something is required: a confinement says what it
    allows."""

    env: ProcessEnv
    boundary: WorkspaceBoundary | None
    fence: Fence
    sandbox: Sandbox
    shell_denied: str | None
    shell_refusal: str | None = None

    def check_shell(self) -> None:
        """Raise ShellNotAllowedError when this tenant may not run commands."""
        if self.shell_denied is not None:
            raise ShellNotAllowedError(self.shell_denied, self.shell_refusal)
