"""Where a client's path leads, and whether the tenant may reach it (see the package docstring).

Resolving touches the filesystem (symlinks): `resolve` is blocking, and callers run it in a thread.
"""

from __future__ import annotations

import dataclasses
import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentforge.tools.sandbox import Sandbox, SandboxRefusedError


class OutsideWorkspaceError(Exception):
    """A path the caller may not reach: outside the workspace, or not the tenant's."""


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True, slots=True)
class WorkspaceAccess:
    """The tenant's workspace `root` (absolute, as configured) and the directories inside it that are
    not the tenant's (`excluded`, real paths). `base` is the directory relative paths start from: the
    root, or a directory inside it that the client chose."""

    root: Path
    excluded: tuple[Path, ...] = ()
    base: Path | None = None
    # Whether the git repository holding the workspace may lie above it: the local user's workspace
    # (its own checkout); a confined tenant's only counts as a repository when it is one itself.
    repo_above: bool = False
    # A confined tenant's sandbox (`repo_above` False): the server's own programs reading its
    # workspace run inside it (`program_sandbox`).
    sandbox: Sandbox | None = None

    def program_sandbox(self) -> Sandbox | None:
        """Where a program of the server's own (ripgrep, the git reader) runs to read this
        workspace: None for this process (the local user's workspace; a tenant's whose commands the
        operator runs unsandboxed), else the tenant's sandbox, where nothing the tenant may not see
        exists for a path or a repository's file to lead to. Raises SandboxRefusedError for a
        confined tenant's workspace with no sandbox to run in: it is not read outside one."""
        if self.repo_above:
            return None
        if self.sandbox is None:
            raise SandboxRefusedError("no sandbox is known for this confined tenant's workspace")
        self.sandbox.check()
        return self.sandbox if self.sandbox.active else None

    @property
    def real_root(self) -> Path:
        return self.root.resolve()

    def at(self, directory: str | None) -> WorkspaceAccess:
        """This access with relative paths starting at `directory` (absolute, inside the workspace).
        Blocking: resolves symlinks."""
        if directory is None or not directory.strip():
            return self
        if not os.path.isabs(directory):
            raise OutsideWorkspaceError(f"directory must be an absolute path, got {directory!r}")
        base = self.resolve(directory)
        if not base.is_dir():
            raise OutsideWorkspaceError(f"directory {directory!r} is not a directory in the workspace")
        return dataclasses.replace(self, base=base)

    def resolve(self, raw: str | Path) -> Path:
        """The absolute path `raw` names (relative to `base`, `~` not expanded), refused unless both
        the path as written and its real location lie inside the workspace and outside `excluded`.
        Returns the path as written (normalised, symlinks kept). Blocking."""
        return self.locate(raw)[0]

    def locate(self, raw: str | Path) -> tuple[Path, Path]:
        """`resolve`'s path and its real location as checked: what is read is opened there
        (tools/pinned.py), wherever a symlink put in the path since would lead. Blocking."""
        start = self.base or self.root
        path = Path(os.path.normpath(os.path.join(start, raw)))
        real = leads_to(path)
        if real is None:
            raise OutsideWorkspaceError(f"Refusing to access {path}: it is a symlink loop.")
        lexically_inside = _within(path, self.root) or _within(path, self.real_root)
        if not lexically_inside or not _within(real, self.real_root):
            where = f" (it resolves to {real})" if real != path else ""
            raise OutsideWorkspaceError(
                f"Refusing to access {path}{where}: it is outside the workspace {self.root}."
            )
        if self.is_excluded(real):
            raise OutsideWorkspaceError(f"Refusing to access {path}: it is not this tenant's.")
        return path, real

    def is_excluded(self, real: Path) -> bool:
        return any(_within(real, root) for root in self.excluded)

    def relative(self, path: Path) -> str:
        """`path` relative to the workspace root, slash-separated ("" for the root itself)."""
        for root in (self.root, self.real_root):
            if _within(path, root):
                relative = path.relative_to(root).as_posix()
                return "" if relative == "." else relative
        return path.as_posix()

    def excluded_inside(self, directory: Path) -> list[str]:
        """The excluded directories strictly inside `directory`, relative to it: what a walk or a
        search from `directory` must leave out."""
        real = directory.resolve()
        return [
            root.relative_to(real).as_posix()
            for root in self.excluded
            if root != real and root.is_relative_to(real)
        ]


def leads_to(path: Path) -> Path | None:
    """Where `path` leads, symlinks followed; None for a symlink loop. Blocking."""
    try:
        return path.resolve()
    except RuntimeError:  # Python 3.11's word for a loop (3.13 raises OSError ELOOP)
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise


def tenant_workspace(
    root: Path,
    *,
    not_its_own: Iterable[Path],
    its_own: Iterable[Path] = (),
    repo_above: bool = False,
    sandbox: Sandbox | None = None,
) -> WorkspaceAccess:
    """The access to a tenant's workspace `root`: `not_its_own` are real paths that are not the
    tenant's (its data directory, the fence's closed roots, its boundary's exclusions); those inside
    the workspace are excluded, but for the tenant's own roots (`its_own`). Blocking (resolves)."""
    real = root.resolve()
    own = set(its_own)
    excluded = sorted({p for p in not_its_own if p != real and p.is_relative_to(real) and p not in own})
    return WorkspaceAccess(root=root, excluded=tuple(excluded), repo_above=repo_above, sandbox=sandbox)
