"""Paths no permission opens: the server's own data and the other tenants' roots.

A path outside the workspace normally asks `external_directory`, and a person (or a rule) may
approve it. On a server with several tenants, approving a path in another tenant's workspace would
hand one tenant's files to another, and the server's data directory holds every tenant's database
and spill files. So those roots are fenced: a request for a path inside one, or for a directory
that contains one (a grep or glob there would walk into it), is refused before any rule or person
is asked. The fence is part of a tenant's confinement (tools/confinement.py): `guard_path` applies it
to every outside path, whatever context the path comes from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentforge.tools.asking import PermissionDeniedError, PermissionRequest

EXTERNAL_DIRECTORY = "external_directory"


class FencedPathError(PermissionDeniedError):
    """A path inside a fenced root: refused before any rule or person is asked. Like a rule's
    denial, it does not end the turn: the model may try another way."""

    blocks_loop = False
    refused_by = "fence"


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True, slots=True)
class Fence:
    """`closed` roots are refused, except inside the tenant's own `open` roots they contain."""

    closed: tuple[Path, ...] = ()
    open: tuple[Path, ...] = ()

    def applies_to(self, request: PermissionRequest) -> bool:
        return bool(self.closed) and request.permission == EXTERNAL_DIRECTORY

    def refusal(self, request: PermissionRequest) -> str | None:
        """Why the request may not even be asked, or None when it may. Looks at the filesystem
        (which fenced roots exist): call it off the event loop."""
        if not self.applies_to(request):
            return None
        target = _path(request.metadata.get("filepath"))
        is_directory = target is not None and target == _path(request.metadata.get("parentDir"))
        named = [target, _path(request.metadata.get("parentDir"))]
        named += [_path(pattern.removesuffix("/*")) for pattern in request.patterns]
        for path in (p for p in named if p is not None):
            if self._shuts(path):
                return f"Refusing to access {path}: it belongs to the server or to another tenant."
        if is_directory and target is not None and self._contains_closed(target):
            return f"Refusing to access {target}: it contains the server's or other tenants' files."
        return None

    def _shuts(self, path: Path) -> bool:
        inside_closed = any(_within(path, root) for root in self.closed)
        return inside_closed and not any(_within(path, root) for root in self.open)

    def _contains_closed(self, directory: Path) -> bool:
        return any(root.is_relative_to(directory) and root.exists() for root in self.closed)


def _path(value: object) -> Path | None:
    if not isinstance(value, str) or not os.path.isabs(value):
        return None
    return Path(os.path.normpath(value))
