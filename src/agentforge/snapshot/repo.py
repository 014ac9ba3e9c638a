"""`SnapshotRepo`: one directory's files as git trees in a private object store (see the package).

Every method blocks (libgit2 hashes files, restoring writes them): callers run them in a thread. Calls
on one store are serialised by a lock per store, since libgit2's index is one file.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentforge.tools import pinned
from agentforge.tools.base import ToolError
from agentforge.tools.diff import file_diff
from agentforge.tools.pinned import PathMovedError

if TYPE_CHECKING:
    # Imported where used: libgit2's bindings cost start-up time a server that never snapshots
    # should not pay.
    import pygit2

SNAPSHOTS_DIR = "snapshots"
_EXCLUDE_HEADER = "# Written by Agent Forge: directories inside the workspace that are not the tenant's.\n"

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(git_dir: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(git_dir, threading.Lock())


class SnapshotError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class FileChange:
    """One tracked path's change between two trees, for diffs and audit entries."""

    path: str  # relative to the tracked directory
    before: str | None  # text content (None: absent, or binary)
    after: str | None
    status: Literal["added", "deleted", "modified"]

    @property
    def binary(self) -> bool:
        """A side that exists but has no text (binary content)."""
        return (self.before is None and self.status != "added") or (
            self.after is None and self.status != "deleted"
        )


@dataclass(slots=True)
class RestoreReport:
    restored: list[str] = field(default_factory=list)  # relative paths written or removed
    skipped: dict[str, str] = field(default_factory=dict)  # relative path -> why it was left alone


def repo_dir(data_dir: Path, work_tree: Path) -> Path:
    """Where the snapshots of `work_tree` live in the tenant's data directory."""
    key = hashlib.sha256(str(work_tree.resolve()).encode()).hexdigest()[:24]
    return data_dir / SNAPSHOTS_DIR / key


class SnapshotRepo:
    """The snapshots of `work_tree`, stored in `git_dir`. `excluded`: directories inside the work tree
    (relative, slash-separated) that are never tracked nor restored."""

    def __init__(self, git_dir: Path, work_tree: Path, excluded: Sequence[str] = ()) -> None:
        self.git_dir = git_dir
        # Resolved once: every file is then reached from it through no symlink (tools/pinned.py),
        # so a work tree turned into a symlink later leads nowhere.
        self.work_tree = work_tree.resolve()
        self.excluded = tuple(sorted(excluded))
        self._lock = _lock_for(git_dir)
        self._repo: pygit2.Repository | None = None

    def _open(self) -> pygit2.Repository:
        if self._repo is not None:
            return self._repo
        import pygit2

        if not (self.git_dir / "HEAD").exists():
            self.git_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            pygit2.init_repository(str(self.git_dir), bare=True)
            os.chmod(self.git_dir, 0o700)
        repo = pygit2.Repository(str(self.git_dir))
        repo.workdir = str(self.work_tree)  # in memory only: nothing is written into the work tree
        info = self.git_dir / "info"
        info.mkdir(mode=0o700, exist_ok=True)
        patterns = "".join(f"/{path.strip('/')}/\n" for path in self.excluded)
        (info / "exclude").write_text(_EXCLUDE_HEADER + patterns)
        # The files as they are, byte for byte: no line-ending or other filter of the tenant's
        # `.gitattributes` or the server's git config (one would hide an edit of line endings).
        (info / "attributes").write_text("* -text -ident -filter -diff\n")
        repo.config["core.autocrlf"] = "false"
        self._repo = repo
        return repo

    def track(self) -> str:
        """Record the work tree's files now; returns the tree's id."""
        with self._lock:
            return self._track()

    def _track(self) -> str:
        import pygit2

        repo = self._open()
        index = repo.index
        try:
            index.read(force=True)
            known = repo[index.write_tree()]  # the last snapshot (its trees cached in the index file)
            assert isinstance(known, pygit2.Tree)
            index.add_all()
            # Files deleted since the last snapshot leave the index too (add_all keeps them).
            gone = [entry.path for entry in index if not os.path.lexists(self.work_tree / entry.path)]
            for path in gone:
                index.remove(path)
            for delta in index.diff_to_tree(known).deltas:  # what libgit2 hashed anew
                if delta.status != pygit2.enums.DeltaStatus.DELETED:
                    self._confirm(repo, index, index[delta.new_file.path])
            tree = str(index.write_tree())
            index.write()  # after the tree: the index file keeps its trees for the next snapshot
        except (pygit2.GitError, OSError) as exc:  # a file swapped while libgit2 walked; a locked index
            raise SnapshotError(f"could not snapshot {self.work_tree}: {exc}") from exc
        return tree

    def _confirm(self, repo: pygit2.Repository, index: pygit2.Index, entry: pygit2.IndexEntry) -> None:
        """libgit2 walks the work tree by path: a directory swapped for a symlink meanwhile (by a
        command the tenant runs beside) would have it store another tenant's file as this tenant's.
        So what it hashed anew is read again through no symlink (tools/pinned.py), and kept only
        when that is what the work tree holds there; otherwise the path is left out."""
        import pygit2

        path = str(entry.path)
        found = self._bytes_on_disk(path)
        if found is None or found[1] != (entry.mode == pygit2.enums.FileMode.LINK):
            index.remove(path)
            return
        if pygit2.hash(found[0]) != entry.id:  # hashed only: what libgit2 stored is it, mostly
            index.add(pygit2.IndexEntry(path, repo.create_blob(found[0]), entry.mode))

    def changed(self, tree: str) -> list[str]:
        """The paths (relative to the work tree) that differ now from `tree`."""
        with self._lock:
            now = self._track()
            if now == tree:
                return []
            repo = self._open()
            diff = _tree(repo, tree).diff_to_tree(_tree(repo, now))
            paths = {delta.new_file.path for delta in diff.deltas} | {
                delta.old_file.path for delta in diff.deltas
            }
            return sorted(paths)

    def changes(self, tree: str, paths: Iterable[str]) -> list[FileChange]:
        """How each of `paths` differs now from `tree` (unchanged paths are left out)."""
        with self._lock:
            repo = self._open()
            old = _tree(repo, tree)
            found = []
            for path in sorted(set(paths)):
                before = self._text_in(repo, old, path)
                after, exists_now = self._text_on_disk(path)
                existed = self._entry(old, path) is not None
                if existed == exists_now and before == after:
                    continue
                status: Literal["added", "deleted", "modified"] = (
                    "added" if not existed else "deleted" if not exists_now else "modified"
                )
                found.append(FileChange(path=path, before=before, after=after, status=status))
            return found

    def restore(self, tree: str, paths: Iterable[str]) -> RestoreReport:
        """Put each of `paths` back to its content in `tree`, deleting the ones `tree` does not hold."""
        with self._lock:
            repo = self._open()
            old = _tree(repo, tree)
            report = RestoreReport()
            for path in sorted(set(paths)):
                why = self._restore_one(repo, old, path)
                if why is None:
                    report.restored.append(path)
                else:
                    report.skipped[path] = why
            return report

    # -- one path ---------------------------------------------------------------------------------

    @staticmethod
    def _entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
        try:
            return tree[path]
        except KeyError:
            return None

    def _text_in(self, repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> str | None:
        import pygit2

        entry = self._entry(tree, path)
        if entry is None:
            return None
        blob = repo[entry.id]
        if not isinstance(blob, pygit2.Blob) or blob.is_binary:
            return None
        return blob.data.decode("utf-8", errors="replace")

    def _text_on_disk(self, path: str) -> tuple[str | None, bool]:
        """The text at `path` now (None: binary or unreadable), and whether anything is there."""
        found = self._bytes_on_disk(path)
        if found is None:
            return None, False
        data, is_link = found
        if is_link:
            return os.fsdecode(data), True
        return (None if b"\0" in data[:8192] else data.decode("utf-8", errors="replace")), True

    def _bytes_on_disk(self, path: str) -> tuple[bytes, bool] | None:
        """The bytes of the regular file at `path` (a symlink's: its target), and whether it is a
        symlink; None when there is neither. A directory on the way that became a symlink leads
        nowhere (tools/pinned.py): nothing of the work tree is there, wherever it points."""
        real = self._real(path)
        try:
            found = None if real is None else pinned.lstat(real)
            if real is None or found is None:
                return None
            if stat.S_ISLNK(found.st_mode):
                with pinned.parent(real) as (directory, name):
                    return os.fsencode(os.readlink(name, dir_fd=directory)), True
            read = None if stat.S_ISDIR(found.st_mode) else pinned.read_file(Path(path), real)
        except (OSError, ToolError):  # PathMovedError among them; a FIFO or a device is refused
            return None
        return None if read is None else (read[0], False)

    def _real(self, path: str) -> Path | None:
        """Where `path` (relative, as git names it) lies in the work tree as it really is; None when it
        climbs out (`..`) or lies in an excluded directory."""
        if any(path == root or path.startswith(root + "/") for root in self.excluded):
            return None
        parts = path.split("/")
        if not path or any(part in ("", ".", "..") for part in parts):
            return None
        return self.work_tree.joinpath(*parts)

    def _restore_one(self, repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> str | None:
        """Written and removed through no symlink on the way (tools/pinned.py): a directory swapped
        for a symlink to another tenant's files is refused, never followed."""
        real = self._real(path)
        if real is None:
            return "it lies outside the workspace or is not the tenant's"
        try:
            return self._put_back(repo, tree, path, real)
        except PathMovedError:
            return "a directory on its path is a symlink"
        except OSError as exc:  # a file where a directory on its path was, say
            return f"it could not be written: {exc.strerror or exc}"

    def _put_back(self, repo: pygit2.Repository, tree: pygit2.Tree, path: str, real: Path) -> str | None:
        import pygit2

        entry = self._entry(tree, path)
        found = pinned.lstat(real)
        if found is not None and stat.S_ISDIR(found.st_mode):
            return "a directory is in its place"
        if entry is None:
            if found is not None:
                pinned.unlink(real)
            return None
        blob = repo[entry.id]
        if not isinstance(blob, pygit2.Blob):
            return "the snapshot holds a directory there"
        link = pygit2.enums.FileMode.LINK
        # A symlink, a FIFO or a device there is replaced, never written through (nor waited on).
        if found is not None and (not stat.S_ISREG(found.st_mode) or entry.filemode == link):
            pinned.unlink(real)
        if entry.filemode == link:
            with pinned.parent(real, make=True) as (directory, name):
                os.symlink(blob.data.decode("utf-8", errors="surrogateescape"), name, dir_fd=directory)
            return None
        mode = 0o755 if entry.filemode == pygit2.enums.FileMode.BLOB_EXECUTABLE else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK  # a FIFO put there since: ENXIO
        fd = pinned.open_file(real, flags, mode, make_parents=True)
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob.data)
            if stat.S_IMODE(os.fstat(fd).st_mode) & 0o111 != mode & 0o111:
                os.fchmod(fd, mode)
        return None


def _tree(repo: pygit2.Repository, tree_id: str) -> pygit2.Tree:
    import pygit2

    try:
        found = repo[tree_id]
    except (KeyError, ValueError) as exc:
        raise SnapshotError(f"no snapshot {tree_id}") from exc
    if not isinstance(found, pygit2.Tree):
        raise SnapshotError(f"{tree_id} is not a snapshot")
    return found


def unified_patch(changes: Iterable[FileChange]) -> str:
    """One unified diff over `changes` (binary files as a one-line note)."""
    pieces = []
    for change in changes:
        if change.binary:
            pieces.append(f"Binary file {change.path} {change.status}\n")
            continue
        pieces.append(file_diff(change.path, change.before or "", change.after or "").patch)
    return "".join(pieces)
