"""How the routes read a workspace's repository (`git_view`): in this process (workspace/git.py, in
a worker thread) for the local user, inside the sandbox for a confined tenant
(workspace/git_confined.py), not at all for a confined tenant without one."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, Protocol

from agentforge.tools.sandbox import SandboxRefusedError
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.git import FileStatus, GitView, VcsFileDiff, VcsInfo
from agentforge.workspace.git_confined import ConfinedGit


class GitReader(Protocol):
    """The git state of a workspace, as the routes read it."""

    async def has_repo(self) -> bool: ...

    async def info(self) -> VcsInfo: ...

    async def diff(self, against: Literal["head", "branch"]) -> list[VcsFileDiff]: ...

    async def status(self) -> list[FileStatus]: ...

    async def ignored(self, paths: list[str]) -> set[str]: ...

    async def diff_against_head(self, relative: str, text: str) -> str | None: ...


async def git_view(access: WorkspaceAccess) -> GitReader:
    """The repository of the workspace, read where the workspace's owner may look: in this process
    for the local user (and a tenant whose commands the operator runs without a sandbox), inside
    the sandbox for a confined tenant; none for a confined tenant without one."""
    try:
        sandbox = access.program_sandbox()
    except SandboxRefusedError:
        return InThisProcess(GitView(access, None))
    if sandbox is None:
        return InThisProcess(await asyncio.to_thread(GitView.open_in_process, access))
    return ConfinedGit(access, sandbox)


@dataclass(frozen=True, slots=True)
class InThisProcess:
    """`GitReader` over a repository opened here: each read in a worker thread (libgit2 blocks)."""

    view: GitView

    async def has_repo(self) -> bool:
        return self.view.repo is not None

    async def info(self) -> VcsInfo:
        return await asyncio.to_thread(self.view.info)

    async def diff(self, against: Literal["head", "branch"]) -> list[VcsFileDiff]:
        return await asyncio.to_thread(self.view.diff, against)

    async def status(self) -> list[FileStatus]:
        return await asyncio.to_thread(self.view.status)

    async def ignored(self, paths: list[str]) -> set[str]:
        return await asyncio.to_thread(self.view.ignored, paths)

    async def diff_against_head(self, relative: str, text: str) -> str | None:
        return await asyncio.to_thread(self.view.diff_against_head, relative, text)
