"""Reverting a session to a message, and back (KERNEL 1.1 `/revert`, `/unrevert`; opencode's
`session/revert.ts`), and the file diffs of a session's turns (`/diff`).

Revert: the files the session's steps changed from that message on (their `patch` parts,
session/snapshots.py) go back to their content before the earliest of those steps; a file that did not
exist then is deleted. The workspace as it was before the revert is recorded first (a snapshot), so
`/unrevert` can put those same files back. The session's `revert` marks where the hidden messages
start; the next prompt removes them (session/reverted.py). Both refuse a busy session (409).

Only files recorded in the session's patch parts are touched, only inside the session's directory
(snapshot/repo.py refuses paths leading out of it), and a file the session's rules deny `edit` on is
left alone and reported. Each revert and unrevert is audited with the files it changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from agentforge.agents.registry import AgentRegistry
from agentforge.model.events import SESSION_UPDATED, Event, current_actor
from agentforge.model.message import FileDiff, UserMessage, WithParts
from agentforge.model.part import PatchPart
from agentforge.model.session import Session, SessionRevert
from agentforge.permission.rules import evaluate, merge
from agentforge.session.errors import NotFoundError
from agentforge.session.events import now_ms
from agentforge.session.reverted import RevertPointNotFoundError, find_revert_point
from agentforge.session.service import SessionService
from agentforge.session.snapshots import snapshot_repo
from agentforge.snapshot.repo import FileChange, RestoreReport, SnapshotRepo, unified_patch
from agentforge.tools.diff import file_diff

SESSION_REVERTED = "session.reverted"
SESSION_UNREVERTED = "session.unreverted"


def earliest_trees(patches: Sequence[PatchPart], work_tree: Path) -> dict[str, str]:
    """For each file the patches changed (relative to `work_tree`), the tree taken before the earliest
    change: the file's content before all of them."""
    trees: dict[str, str] = {}
    for patch in patches:
        for file in patch.files:
            path = Path(file)
            if path.is_relative_to(work_tree):
                trees.setdefault(path.relative_to(work_tree).as_posix(), patch.hash)
    return trees


class SessionReverts:
    """Bound to one tenant through its session service."""

    def __init__(self, sessions: SessionService) -> None:
        self.sessions = sessions
        self.services = sessions.services
        self.tenant_id = sessions.tenant_id

    async def _history(self, session_id: str) -> list[WithParts]:
        return await self.services.store.history(self.tenant_id, session_id)

    async def _repo(self, session: Session) -> SnapshotRepo | None:
        return await snapshot_repo(await self.sessions.scope(), Path(session.directory))

    async def revert(self, session_id: str, message_id: str, part_id: str | None) -> Session:
        session = await self.sessions.get(session_id)
        await self.services.runners.assert_idle_anywhere(session_id)
        history = await self._history(session_id)
        try:
            point = find_revert_point(history, message_id, part_id)
        except RevertPointNotFoundError as exc:
            raise NotFoundError(str(exc)) from None
        repo = await self._repo(session)
        trees = earliest_trees(point.patches(history), Path(session.directory))
        snapshot = session.revert.snapshot if session.revert is not None else None
        report = RestoreReport()
        diff = None
        if repo is not None and trees:
            if snapshot is None:
                snapshot = await asyncio.to_thread(repo.track)
            agents = (await self.sessions.scope()).agents
            allowed, report.skipped = _editable(agents, session, history[point.index], trees)
            report = await self._restore(repo, allowed, report)
            changes = await asyncio.to_thread(repo.changes, snapshot, list(trees))
            diff = unified_patch(changes) or None
        session.revert = SessionRevert(
            message_id=history[point.index].info.id, part_id=point.part_id, snapshot=snapshot, diff=diff
        )
        await self._save(session)
        await self._audit(SESSION_REVERTED, session, report, messageID=session.revert.message_id)
        return session

    async def unrevert(self, session_id: str) -> Session:
        session = await self.sessions.get(session_id)
        await self.services.runners.assert_idle_anywhere(session_id)
        reverted = session.revert
        if reverted is None:
            return session
        report = RestoreReport()
        repo = await self._repo(session)
        if repo is not None and reverted.snapshot is not None:
            history = await self._history(session_id)
            try:
                point = find_revert_point(history, reverted.message_id, reverted.part_id)
                trees = earliest_trees(point.patches(history), Path(session.directory))
            except RevertPointNotFoundError:
                trees = {}
            agents = (await self.sessions.scope()).agents
            allowed, report.skipped = _editable(agents, session, None, trees)
            back = dict.fromkeys(allowed, reverted.snapshot)
            report = await self._restore(repo, back, report)
        session.revert = None
        await self._save(session)
        await self._audit(SESSION_UNREVERTED, session, report, messageID=reverted.message_id)
        return session

    async def _restore(
        self, repo: SnapshotRepo, trees: dict[str, str], report: RestoreReport
    ) -> RestoreReport:
        by_tree: dict[str, list[str]] = {}
        for path, tree in trees.items():
            by_tree.setdefault(tree, []).append(path)
        for tree, paths in by_tree.items():
            done = await asyncio.to_thread(repo.restore, tree, paths)
            report.restored += done.restored
            report.skipped.update(done.skipped)
        return report

    async def _save(self, session: Session) -> None:
        session.time.updated = now_ms()
        info = {"sessionID": session.id, "info": session.wire()}
        await self.services.store.write(
            Event(SESSION_UPDATED, info, session_id=session.id, tenant_id=self.tenant_id)
        )

    async def _audit(self, action: str, session: Session, report: RestoreReport, **data: str) -> None:
        await self.services.store.record_audit(
            self.tenant_id,
            action,
            actor=current_actor(),
            session_id=session.id,
            data={
                **data,
                "restored": sorted(report.restored),
                "skipped": dict(sorted(report.skipped.items())),
            },
        )

    # -- diffs ----------------------------------------------------------------------------------

    async def diff(self, session_id: str, message_id: str | None) -> list[FileDiff]:
        """What the session's steps changed in the files (those answering `message_id` only, when
        given): each file from before its earliest change to its content now."""
        session = await self.sessions.get(session_id)
        history = await self._history(session_id)
        if message_id is not None and not any(item.info.id == message_id for item in history):
            raise NotFoundError(f"Message not found: {message_id}")
        patches = [
            part
            for item in history
            if message_id is None
            or item.info.id == message_id
            or getattr(item.info, "parent_id", None) == message_id
            for part in item.parts
            if isinstance(part, PatchPart)
        ]
        repo = await self._repo(session)
        trees = earliest_trees(patches, Path(session.directory))
        if repo is None or not trees:
            return []
        diffs: list[FileDiff] = []
        for tree in dict.fromkeys(trees.values()):
            paths = [path for path, first in trees.items() if first == tree]
            changes = await asyncio.to_thread(repo.changes, tree, paths)
            diffs += [_file_diff(change) for change in changes]
        return sorted(diffs, key=lambda d: d.file)


def _editable(
    agents: AgentRegistry, session: Session, point: WithParts | None, trees: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Split `trees` by the session's rules for `edit` (the agent of the reverted turn, or the default
    agent, then the session's own rules): a denied file is not written, and is reported why."""
    agent_name = point.info.agent if point is not None and isinstance(point.info, UserMessage) else None
    agent = agents.get(agent_name or agents.default_name)
    rules = merge(agent.permission, session.permission or [])
    allowed: dict[str, str] = {}
    denied: dict[str, str] = {}
    for path, tree in trees.items():
        if evaluate("edit", path, rules).action == "deny":
            denied[path] = "the session's rules deny editing it"
        else:
            allowed[path] = tree
    return allowed, denied


def _file_diff(change: FileChange) -> FileDiff:
    if change.binary:
        return FileDiff(file=change.path, patch="", status=change.status)
    found = file_diff(change.path, change.before or "", change.after or "")
    return FileDiff(
        file=change.path,
        patch=found.patch,
        additions=found.additions,
        deletions=found.deletions,
        status=change.status,
    )
