"""Snapshots around a step's tool calls (snapshot/ says how they are stored).

Before the first tool of a step that may change files runs, the session directory's files are
recorded as a tree; once the step is over, the paths that differ from it are written as a `patch`
part of the step's assistant message (absolute paths, and the tree as `hash`). Reverting uses those
parts (session/channels/revert.py). A step that only reads, answers or asks takes no snapshot, so
a chat costs nothing here.

Snapshots are on unless the config says `"snapshot": false`. A snapshot that fails (a full disk, an
unreadable tree) is logged and the step goes on without one: its changes then cannot be reverted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from agentforge.config import Config
from agentforge.model import ids
from agentforge.model.message import AssistantMessage
from agentforge.model.part import PatchPart
from agentforge.session.events import SessionEvents
from agentforge.session.scope import TenantScope
from agentforge.session.workspace import workspace_access
from agentforge.snapshot.repo import SnapshotError, SnapshotRepo, repo_dir
from agentforge.workspace.access import OutsideWorkspaceError

log = logging.getLogger(__name__)


def snapshots_enabled(config: Config) -> bool:
    return (config.model_extra or {}).get("snapshot", True) is not False


async def snapshot_repo(scope: TenantScope, directory: Path) -> SnapshotRepo | None:
    """The snapshot store of a session directory of this tenant, or None when snapshots are off."""
    if not snapshots_enabled(scope.settings.config):
        return None

    def build() -> SnapshotRepo:
        access = workspace_access(scope)
        # Where the directory leads now, checked as the session's creation checked it: the store
        # reads and writes there (through no symlink) whatever the directory is turned into later.
        try:
            real = access.locate(directory)[1]
        except (OutsideWorkspaceError, OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
            raise SnapshotError(f"the session's directory {directory} cannot be snapshotted: {exc}") from None
        excluded = access.excluded_inside(real)
        return SnapshotRepo(repo_dir(scope.settings.data_dir, real), real, excluded)

    return await asyncio.to_thread(build)


class StepSnapshot:
    """The snapshot of one step (one assistant message): taken lazily, recorded at the end. `open_repo`
    gives the session directory's store (None when snapshots are off); it is only called once a tool
    that may change files is about to run."""

    def __init__(
        self,
        open_repo: Callable[[], Awaitable[SnapshotRepo | None]],
        events: SessionEvents,
        message: AssistantMessage,
    ) -> None:
        self._open_repo = open_repo
        self._repo: SnapshotRepo | None = None
        self._events = events
        self._message = message
        self._tree: str | None = None
        self._failed = False
        self._taken = asyncio.Lock()

    async def before_tool(self) -> None:
        """Called before each tool call of the step that may change files runs (`Tool.changes_files`,
        or plugin code around it: session/tool_calls.py; a step with none takes no snapshot): the
        first waits here for the snapshot, and so do calls running beside it."""
        async with self._taken:
            if self._tree is not None or self._failed:
                return
            try:
                repo = await self._open_repo()
                if repo is not None:
                    self._tree = await asyncio.to_thread(repo.track)
                    self._repo = repo
            except (SnapshotError, OSError) as exc:
                log.warning("No snapshot for %s: %s", self._message.id, exc)
            self._failed = self._tree is None  # off, or failed: not tried again this step

    async def finish(self) -> None:
        """Write the step's `patch` part when its tools changed files."""
        repo, tree = self._repo, self._tree
        if repo is None or tree is None:
            return
        try:
            changed = await asyncio.to_thread(repo.changed, tree)
        except (SnapshotError, OSError) as exc:
            log.warning("Could not record what %s changed: %s", self._message.id, exc)
            return
        if not changed:
            return
        part = PatchPart(
            id=ids.ascending("prt"),
            session_id=self._message.session_id,
            message_id=self._message.id,
            hash=tree,
            files=[str(repo.work_tree / path) for path in changed],
        )
        await self._events.update_part(part)
