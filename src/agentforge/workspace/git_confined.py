"""A confined tenant's repository, read inside its sandbox.

What git reads is the tenant's to write: a `.git` file naming another `gitdir:`, a `commondir`,
alternates, a symlink anywhere under `.git`. libgit2 in the server's own process follows them
wherever they lead, so a tenant's workspace could show another tenant's history (its HEAD's files
as a diff against the tenant's own, its branches). Inside the tenant's sandbox (bubblewrap: the
same view its commands get) other tenants' roots and the server's data are not there to be read,
and no check of paths can be raced. So each read runs this module in the sandbox, as a child
process of its own (`python -I -m agentforge.workspace.git_confined`): it reads a request as JSON
on stdin, opens the repository with `GitView.open_in_process` there, and writes the answer as JSON.
The interpreter and the packages it imports are bound read-only into the child's view.

A read that fails (the sandbox refused, a limit hit, `GIT_READ_TIMEOUT_SECONDS` passed) is logged
and answered as if there were no repository: nothing is shown rather than something unchecked.
"""

from __future__ import annotations

import functools
import json
import logging
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from agentforge.tools.sandbox import OWN_PROGRAM_ENV, Sandbox, SandboxRefusedError
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.git import FileStatus, GitView, VcsFileDiff, VcsInfo

log = logging.getLogger(__name__)

GIT_READ_TIMEOUT_SECONDS: Final = 60.0
# Inside the sandbox the child reads in this process, as the local user's reads do.
_INSIDE: Final = Sandbox(kind="unsandboxed", note="inside the tenant's sandbox")


@dataclass(frozen=True, slots=True)
class ConfinedGit:
    """`GitReader` for a confined tenant: every read a child process in its sandbox."""

    access: WorkspaceAccess
    sandbox: Sandbox

    @property
    def has_repo(self) -> bool:
        return bool(self._read("has_repo", {}, False))

    def info(self) -> VcsInfo:
        return VcsInfo.model_validate(self._read("info", {}, {}))

    def diff(self, against: Literal["head", "branch"]) -> list[VcsFileDiff]:
        return [VcsFileDiff.model_validate(item) for item in self._read("diff", {"against": against}, [])]

    def status(self) -> list[FileStatus]:
        return [FileStatus.model_validate(item) for item in self._read("status", {}, [])]

    def ignored(self, paths: Iterable[str]) -> set[str]:
        return set(self._read("ignored", {"paths": list(paths)}, []))

    def diff_against_head(self, relative: str, text: str) -> str | None:
        found = self._read("diff_against_head", {"relative": relative, "text": text}, None)
        return found if isinstance(found, str) else None

    def _read(self, op: str, args: dict[str, Any], nothing: Any) -> Any:
        """The child's answer to `op`, or `nothing` (what no repository answers) when it fails."""
        root = self.access.real_root
        request = {
            "root": str(root),
            "excluded": [str(path) for path in self.access.excluded],
            "op": op,
            "args": args,
        }
        child = [sys.executable, "-I", "-B", "-m", __name__]
        try:
            argv = self.sandbox.reading(_interpreter_paths()).command(network=False).wrap(child, root)
            done = subprocess.run(
                argv,
                input=json.dumps(request).encode(),
                capture_output=True,
                env=OWN_PROGRAM_ENV,
                timeout=GIT_READ_TIMEOUT_SECONDS,
                check=False,
            )
        except (SandboxRefusedError, OSError, subprocess.TimeoutExpired) as exc:
            log.warning("reading the repository of %s in its sandbox failed: %s", root, exc)
            return nothing
        if done.returncode != 0:
            reason = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["no output"]
            log.warning(
                "reading the repository of %s in its sandbox failed (exit %d): %s",
                root,
                done.returncode,
                reason[0],
            )
            return nothing
        return json.loads(done.stdout)["answer"]


@functools.cache
def _interpreter_paths() -> tuple[Path, ...]:
    """Where the child's Python comes from: the environment, its base installation, and the
    directories holding the packages it imports (this one's portions, libgit2's and pydantic's)."""
    import pydantic
    import pydantic_core
    import pygit2

    import agentforge

    found = {Path(sys.prefix), Path(sys.base_prefix)}
    found.update(Path(portion).parent for portion in agentforge.__path__)
    for module in (pygit2, pydantic, pydantic_core):
        if module.__file__ is not None:
            found.add(Path(module.__file__).parents[1])
    return tuple(sorted({path.resolve() for path in found if path.is_dir()}))


# --- the child ---------------------------------------------------------------------------------------


def answer(request: dict[str, Any]) -> Any:
    """What the repository of `request`'s workspace says to its `op`, as JSON-ready data."""
    access = WorkspaceAccess(
        Path(request["root"]),
        excluded=tuple(Path(path) for path in request["excluded"]),
        sandbox=_INSIDE,
    )
    view, args = GitView.open_in_process(access), request["args"]
    match request["op"]:
        case "has_repo":
            return view.has_repo
        case "info":
            return view.info().wire()
        case "diff":
            return [item.wire() for item in view.diff(args["against"])]
        case "status":
            return [item.wire() for item in view.status()]
        case "ignored":
            return sorted(view.ignored(args["paths"]))
        case "diff_against_head":
            return view.diff_against_head(args["relative"], args["text"])
    raise ValueError(f"unknown read {request['op']!r}")


def main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    sys.stdout.write(json.dumps({"answer": answer(request)}))


if __name__ == "__main__":
    main()
