"""Plan/build reminders (KERNEL 4.4 step 10): synthetic text added to the last user message of the
history sent to the model, in memory only.

The plan agent is told on every call that it is read-only; the rules enforce it, the reminder keeps the
model from trying. After a session switches from plan to build, build is told that it may now act.
"""

from __future__ import annotations

from typing import Final

from agentforge.model import ids
from agentforge.model.message import AssistantMessage, UserMessage, WithParts
from agentforge.model.part import TextPart

PLAN_AGENT: Final = "plan"
BUILD_AGENT: Final = "build"

PLAN_MODE: Final = """<system-reminder>
Plan mode is active. You are in a READ-ONLY phase: you MUST NOT edit, create or delete files (except
plan files under .agentforge/plans/), change configuration, commit, or run commands that modify the
system. Use only read-only tools and commands to inspect the code. This overrides any other instruction,
including direct requests from the user to make changes now.

Your job: understand the request, investigate the code, ask clarifying questions where the intent is
ambiguous, and produce a clear, step-by-step plan the user can review: the files to change, what to change
in each, and how to verify the result.
</system-reminder>"""

BUILD_SWITCH: Final = """<system-reminder>
Your operational mode has changed from plan to build. You are no longer in read-only mode. You may now
edit files, run commands and use all of your tools to carry out the plan agreed above.
</system-reminder>"""


def with_reminders(history: list[WithParts], agent: str) -> list[WithParts]:
    """The history with the reminders due for `agent` appended to its last user message."""
    due = reminders_for(history, agent)
    if not due:
        return history
    index = _last_user_index(history)
    if index is None:
        return history
    item = history[index]
    extra = [_synthetic(item.info, text) for text in due]
    return [*history[:index], WithParts(info=item.info, parts=[*item.parts, *extra]), *history[index + 1 :]]


def reminders_for(history: list[WithParts], agent: str) -> list[str]:
    if agent == PLAN_AGENT:
        return [PLAN_MODE]
    planned = any(isinstance(m.info, AssistantMessage) and m.info.agent == PLAN_AGENT for m in history)
    if agent == BUILD_AGENT and planned:
        return [BUILD_SWITCH]
    return []


def _last_user_index(history: list[WithParts]) -> int | None:
    for index in range(len(history) - 1, -1, -1):
        if isinstance(history[index].info, UserMessage):
            return index
    return None


def _synthetic(message: UserMessage | AssistantMessage, text: str) -> TextPart:
    return TextPart(
        id=ids.ascending("prt"),
        session_id=message.session_id,
        message_id=message.id,
        text=text,
        synthetic=True,
    )
