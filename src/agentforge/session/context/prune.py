"""Pruning (KERNEL 6.6): old tool outputs stop being sent to the model once a session is long.

After each loop exit, completed tool outputs older than the two most recent user turns and beyond a
protected window of recent output are marked `state.time.compacted`; history conversion then sends a
placeholder instead (history.CLEARED_TOOL_OUTPUT). The stored output stays. On by default;
`compaction.prune: false` turns it off.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Final

from agentforge.model.message import AssistantMessage, UserMessage, WithParts
from agentforge.model.part import CompletedTime, ToolPart, ToolStateCompleted
from agentforge.session.context.compaction import CompactionConfig, estimate_tokens
from agentforge.session.events import now_ms
from agentforge.session.scope import TenantScope
from agentforge.session.services import SessionServices

log = logging.getLogger(__name__)

PRUNE_MINIMUM: Final = 20_000
PRUNE_PROTECT: Final = 40_000
PRUNE_PROTECTED_TOOLS: Final = frozenset({"skill"})
PROTECTED_TURNS: Final = 2


def prunable_parts(messages: list[WithParts]) -> list[ToolPart]:
    """The completed tool parts to mark, newest first (messages oldest first, in id order).

    Walks back from the newest message: the two most recent user turns are skipped, the walk stops at
    a summary or at the first output already pruned, and the newest PRUNE_PROTECT tokens of output
    are kept. Nothing is returned unless more than PRUNE_MINIMUM tokens would be freed.
    """
    turns = 0
    total = 0
    freed = 0
    selected: list[ToolPart] = []
    for item in reversed(messages):
        if isinstance(item.info, UserMessage):
            turns += 1
        if turns < PROTECTED_TURNS:
            continue
        if isinstance(item.info, AssistantMessage) and item.info.summary:
            break
        for part in reversed(item.parts):
            if not isinstance(part, ToolPart) or not isinstance(part.state, ToolStateCompleted):
                continue
            if part.tool in PRUNE_PROTECTED_TOOLS:
                continue
            if part.state.time.compacted:
                return selected if freed > PRUNE_MINIMUM else []
            estimate = estimate_tokens(part.state.output)
            total += estimate
            if total > PRUNE_PROTECT:
                freed += estimate
                selected.append(part)
    return selected if freed > PRUNE_MINIMUM else []


def may_prune(messages: Iterable[WithParts]) -> bool:
    """Whether these messages hold enough completed tool output for `prunable_parts` to find any:
    it frees only output past the newest PRUNE_PROTECT tokens, and only more than PRUNE_MINIMUM.
    Counting a message twice only overestimates, which is safe."""
    total = 0
    for item in messages:
        for part in item.parts:
            if isinstance(part, ToolPart) and isinstance(part.state, ToolStateCompleted):
                total += estimate_tokens(part.state.output)
    return total > PRUNE_PROTECT + PRUNE_MINIMUM


def mark_pruned(part: ToolPart, when: int) -> ToolPart:
    state = part.state
    assert isinstance(state, ToolStateCompleted)
    time = CompletedTime(start=state.time.start, end=state.time.end, compacted=when)
    return part.model_copy(update={"state": state.model_copy(update={"time": time})})


async def prune(
    services: SessionServices,
    scope: TenantScope,
    session_id: str,
    seen: Sequence[WithParts] | None = None,
) -> int:
    """Mark the session's prunable tool outputs; returns how many were marked. `seen`: what the loop
    that just ended read and wrote; when it holds too little tool output, the history is not read."""
    if not CompactionConfig.of(scope.settings.config).prune:
        return 0
    if seen is not None and not may_prune(seen):
        return 0
    tenant_id = scope.tenant_id
    # Pruning stops at a summary, so what lies before the last compaction is never needed.
    history = await services.store.history_since_compaction(tenant_id, session_id)
    parts = prunable_parts(history)
    if not parts:
        return 0
    events = services.events(tenant_id)
    when = now_ms()
    for part in parts[:-1]:
        events.submit_part(mark_pruned(part, when))
    await events.update_part(mark_pruned(parts[-1], when))
    log.info("session %s: pruned %d old tool outputs", session_id, len(parts))
    return len(parts)


def schedule_prune(
    services: SessionServices,
    scope: TenantScope,
    session_id: str,
    seen: Sequence[WithParts] | None = None,
) -> None:
    """Prune in the background; a failure is logged, never raised into the turn."""

    async def run() -> None:
        try:
            await prune(services, scope, session_id, seen)
        except Exception:
            log.exception("session %s: pruning failed", session_id)

    services.spawn(run())
