"""The git state of a workspace, read with libgit2 (pygit2): its branch, what changed since HEAD, and
which paths git ignores.

libgit2 runs no hooks, filters or fsmonitor commands from a repository's config, so reading a
tenant's repository never runs anything the tenant wrote. Paths are reported relative to the
workspace root, and changes outside the workspace (a local user's checkout that holds it) are left
out. All methods block (`git_reader.git_view` runs them in a thread, or in a child process).

A repository's files may point anywhere: a `.git` file's `gitdir:`, `commondir`, alternates, a
symlink under `.git`. Read by this process, a confined tenant's workspace could so show another
tenant's history (their HEAD's files, as a diff against the tenant's own). The routes read a
repository through `git_reader.git_view`, which reads a confined tenant's inside its sandbox
(workspace/git_confined.py), where nothing but what the tenant may see exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.tools.diff import unified_diff
from agentforge.workspace.access import WorkspaceAccess

if TYPE_CHECKING:
    # Imported where used (`import pygit2` in each method): libgit2's bindings are for the requests
    # that read a repository, not for start-up.
    import pygit2

# A status listing stops after this many changed files: a workspace full of untracked build output
# must not turn one request into minutes of diffing.
MAX_STATUS_FILES = 2000


def _untracked() -> pygit2.enums.DiffOption:
    import pygit2

    return (
        pygit2.enums.DiffOption.INCLUDE_UNTRACKED
        | pygit2.enums.DiffOption.RECURSE_UNTRACKED_DIRS
        | pygit2.enums.DiffOption.SHOW_UNTRACKED_CONTENT
    )


class VcsInfo(Wire):
    branch: str | None = None
    default_branch: str | None = Field(default=None)


class VcsFileDiff(Wire):
    file: str
    patch: str
    additions: int
    deletions: int
    status: Literal["added", "deleted", "modified"]


class FileStatus(Wire):
    path: str
    added: int
    removed: int
    status: Literal["added", "deleted", "modified"]


@dataclass(slots=True)
class GitView:
    access: WorkspaceAccess
    repo: pygit2.Repository | None

    @classmethod
    def open_in_process(cls, access: WorkspaceAccess) -> GitView:
        """The repository holding the workspace, read by this process (`git_view` says where a
        workspace's may be); `repo` is None when there is none (or it is bare)."""
        import pygit2

        root = access.real_root
        ceiling = "" if access.repo_above else str(root.parent)
        try:
            found = pygit2.discover_repository(str(root), False, ceiling)
        except pygit2.GitError:
            found = None
        if found is None:
            return cls(access, None)
        repo = pygit2.Repository(found)
        return cls(access, None if repo.is_bare or repo.workdir is None else repo)

    def _workdir(self) -> Path | None:
        return None if self.repo is None or self.repo.workdir is None else Path(self.repo.workdir).resolve()

    def _repo_path(self, relative: str) -> str | None:
        """A workspace-relative path as the repository names it (None when outside its work tree)."""
        workdir = self._workdir()
        if workdir is None:
            return None
        absolute = self.access.real_root / relative
        if not absolute.is_relative_to(workdir):
            return None
        return absolute.relative_to(workdir).as_posix()

    def _workspace_path(self, repo_path: str) -> str | None:
        workdir = self._workdir()
        if workdir is None:
            return None
        absolute = workdir / repo_path
        root = self.access.real_root
        if not absolute.is_relative_to(root) or self.access.is_excluded(absolute):
            return None
        return _shown(absolute.relative_to(root).as_posix())

    def info(self) -> VcsInfo:
        if self.repo is None:
            return VcsInfo()
        repo = self.repo
        branch: str | None
        if repo.head_is_unborn:
            target = repo.lookup_reference("HEAD").target
            branch = str(target).removeprefix("refs/heads/")
        elif repo.head_is_detached:
            branch = None
        else:
            branch = repo.head.shorthand
        default = self._default_branch()
        return VcsInfo(
            branch=None if branch is None else _shown(branch),
            default_branch=None if default is None else _shown(default),
        )

    def _default_branch(self) -> str | None:
        assert self.repo is not None
        origin_head = self.repo.references.get("refs/remotes/origin/HEAD")
        if origin_head is not None and isinstance(origin_head.target, str):
            return origin_head.target.removeprefix("refs/remotes/origin/")
        for name in ("main", "master"):
            if f"refs/heads/{name}" in self.repo.references:
                return name
        return None

    def diff(self, against: Literal["head", "branch"]) -> list[VcsFileDiff]:
        """The working tree's changes as patches: against HEAD, or against where HEAD left the default
        branch (what a pull request would show), untracked files as added."""
        import pygit2

        if self.repo is None or self.repo.head_is_unborn:
            return []
        repo = self.repo
        base = repo.head.peel(pygit2.Commit)
        if against == "branch":
            default = self._default_branch()
            ref = repo.references.get(f"refs/heads/{default}") if default else None
            if ref is not None:
                merge_base = repo.merge_base(base.id, ref.peel(pygit2.Commit).id)
                found_base = repo.get(merge_base) if merge_base is not None else None
                if isinstance(found_base, pygit2.Commit):
                    base = found_base
        found: list[VcsFileDiff] = []
        for patch in base.tree.diff_to_workdir(flags=_untracked()):
            if patch is None:
                continue
            delta = patch.delta
            path = self._workspace_path(delta.new_file.path or delta.old_file.path)
            if path is None:
                continue
            _, additions, deletions = patch.line_stats
            text = "" if delta.is_binary else patch.text or ""
            found.append(
                VcsFileDiff(
                    file=path,
                    patch=text,
                    additions=additions,
                    deletions=deletions,
                    status=_status(delta.status),
                )
            )
            if len(found) >= MAX_STATUS_FILES:
                break
        return found

    def status(self) -> list[FileStatus]:
        """Files that differ from HEAD (untracked ones as added), with their line counts."""
        import pygit2

        if self.repo is None:
            return []
        repo = self.repo
        if repo.head_is_unborn:
            return self._unborn_status()
        found: list[FileStatus] = []
        for patch in repo.head.peel(pygit2.Tree).diff_to_workdir(flags=_untracked()):
            if patch is None:
                continue
            delta = patch.delta
            path = self._workspace_path(delta.new_file.path or delta.old_file.path)
            if path is None:
                continue
            _, additions, deletions = patch.line_stats
            found.append(
                FileStatus(path=path, added=additions, removed=deletions, status=_status(delta.status))
            )
            if len(found) >= MAX_STATUS_FILES:
                break
        return found

    def _unborn_status(self) -> list[FileStatus]:
        """Before the first commit every file git sees is new: its lines count as added."""
        import pygit2

        assert self.repo is not None
        workdir = self._workdir()
        found: list[FileStatus] = []
        for repo_path, flags in sorted(self.repo.status().items()):
            path = self._workspace_path(repo_path)
            if path is None or workdir is None or flags & pygit2.enums.FileStatus.IGNORED:
                continue
            try:
                lines = (workdir / repo_path).read_bytes().count(b"\n")
            except OSError:
                lines = 0
            found.append(FileStatus(path=path, added=lines, removed=0, status="added"))
            if len(found) >= MAX_STATUS_FILES:
                break
        return found

    def ignored(self, paths: Iterable[str]) -> set[str]:
        """Which of the workspace-relative `paths` git ignores."""
        if self.repo is None:
            return set()
        ignored = set()
        for path in paths:
            in_repo = self._repo_path(path)
            if in_repo and self.repo.path_is_ignored(in_repo):
                ignored.add(path)
        return ignored

    def diff_against_head(self, relative: str, text: str) -> str | None:
        """The unified diff from the file as HEAD has it to `text`; None when unchanged or untracked."""
        import pygit2

        if self.repo is None or self.repo.head_is_unborn:
            return None
        in_repo = self._repo_path(relative)
        if in_repo is None:
            return None
        tree = self.repo.head.peel(pygit2.Tree)
        try:
            entry = tree[in_repo]
        except KeyError:
            return None
        blob = self.repo[entry.id]
        if not isinstance(blob, pygit2.Blob) or blob.is_binary:
            return None
        before = blob.data.decode("utf-8", errors="replace")
        return unified_diff(relative, before, text) if before != text else None


def _shown(path: str) -> str:
    """A path as JSON can carry it: bytes that are no UTF-8 (libgit2 hands them over as lone
    surrogates) shown as U+FFFD."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _status(delta: pygit2.enums.DeltaStatus) -> Literal["added", "deleted", "modified"]:
    import pygit2

    if delta in (pygit2.enums.DeltaStatus.ADDED, pygit2.enums.DeltaStatus.UNTRACKED):
        return "added"
    if delta == pygit2.enums.DeltaStatus.DELETED:
        return "deleted"
    return "modified"
