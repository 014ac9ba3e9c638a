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

A read that fails (the sandbox refused, a limit hit, no answer within `GIT_READ_TIMEOUT_SECONDS`,
one over `MAX_ANSWER_BYTES`) is logged and answered as if there were no repository: nothing is shown
rather than something unchecked. Children run under workspace/programs.py's limit per workspace,
and none holds a worker thread while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from agentforge.tools.sandbox import OWN_PROGRAM_ENV, Sandbox, SandboxRefusedError
from agentforge.workspace import programs
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.git import FileStatus, GitView, VcsFileDiff, VcsInfo

log = logging.getLogger(__name__)

# A read that takes longer is given up (a FIFO where libgit2 reads a file would hold it forever).
GIT_READ_TIMEOUT_SECONDS: Final = 10.0
# An answer larger than this is given up: the patches of a workspace full of large files must not
# become gigabytes of the server's memory.
MAX_ANSWER_BYTES: Final = 32 * 1024 * 1024
_STDERR_KEPT: Final = 4096
# Inside the sandbox the child reads in this process, as the local user's reads do.
_INSIDE: Final = Sandbox(kind="unsandboxed", note="inside the tenant's sandbox")


class _Failed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ConfinedGit:
    """`GitReader` for a confined tenant: every read a child process in its sandbox, awaited
    without holding a worker thread."""

    access: WorkspaceAccess
    sandbox: Sandbox

    async def has_repo(self) -> bool:
        return bool(await self._read("has_repo", {}, False))

    async def info(self) -> VcsInfo:
        return VcsInfo.model_validate(await self._read("info", {}, {}))

    async def diff(self, against: Literal["head", "branch"]) -> list[VcsFileDiff]:
        found = await self._read("diff", {"against": against}, [])
        return [VcsFileDiff.model_validate(item) for item in found]

    async def status(self) -> list[FileStatus]:
        return [FileStatus.model_validate(item) for item in await self._read("status", {}, [])]

    async def ignored(self, paths: list[str]) -> set[str]:
        return set(await self._read("ignored", {"paths": paths}, []))

    async def diff_against_head(self, relative: str, text: str) -> str | None:
        found = await self._read("diff_against_head", {"relative": relative, "text": text}, None)
        return found if isinstance(found, str) else None

    async def _read(self, op: str, args: dict[str, Any], nothing: Any) -> Any:
        """The child's answer to `op`, or `nothing` (what no repository answers) when it fails."""
        try:
            async with programs.turn_of(self.access.root):
                return await _run_child(self.sandbox, self.access, op, args)
        except (_Failed, SandboxRefusedError, OSError) as exc:
            log.warning("reading the repository of %s in its sandbox failed: %s", self.access.root, exc)
            return nothing


def _command(sandbox: Sandbox, access: WorkspaceAccess) -> tuple[list[str], Path]:
    """The child's command line, and the workspace's real root it reads. Blocking."""
    root = access.real_root
    command = sandbox.reading(_interpreter_paths()).command(network=False)
    return command.wrap([sys.executable, "-I", "-B", "-m", __name__], root), root


async def _run_child(sandbox: Sandbox, access: WorkspaceAccess, op: str, args: dict[str, Any]) -> Any:
    argv, root = await asyncio.to_thread(_command, sandbox, access)
    excluded = [str(path) for path in access.excluded]
    request = json.dumps({"root": str(root), "excluded": excluded, "op": op, "args": args}).encode()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=OWN_PROGRAM_ENV,
    )
    try:
        async with asyncio.timeout(GIT_READ_TIMEOUT_SECONDS):
            out, err, _ = await asyncio.gather(
                _capped(proc.stdout, MAX_ANSWER_BYTES),
                _capped(proc.stderr, _STDERR_KEPT, keep_tail=True),
                _send(proc, request),
            )
            await proc.wait()
    except TimeoutError:
        raise _Failed(f"no answer within {GIT_READ_TIMEOUT_SECONDS:g} s") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        reason = err.decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise _Failed(f"exit {proc.returncode}: {reason[0]}")
    return json.loads(out)["answer"]


async def _send(proc: asyncio.subprocess.Process, request: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(ConnectionError):  # the child ended without reading: its exit says why
        proc.stdin.write(request)
        await proc.stdin.drain()
    proc.stdin.close()


async def _capped(stream: asyncio.StreamReader | None, limit: int, *, keep_tail: bool = False) -> bytes:
    """What `stream` says up to its end; more than `limit` bytes is a failure (the answer), or with
    `keep_tail` cut to its last `limit` bytes (the reason it failed)."""
    assert stream is not None
    kept = bytearray()
    while chunk := await stream.read(64 * 1024):
        kept += chunk
        if len(kept) > limit:
            if not keep_tail:
                raise _Failed(f"an answer over {limit} bytes")
            del kept[:-limit]
    return bytes(kept)


@functools.cache
def _interpreter_paths() -> tuple[Path, ...]:
    """Where the child's Python comes from: the environment, its base installation, this package's
    portions themselves (not what holds them: a checkout's other files) and the directories holding
    the packages it imports (libgit2's and pydantic's)."""
    import pydantic
    import pydantic_core
    import pygit2

    import agentforge

    found = {Path(sys.prefix), Path(sys.base_prefix)}
    found.update(Path(portion) for portion in agentforge.__path__)
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
            return view.repo is not None
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
