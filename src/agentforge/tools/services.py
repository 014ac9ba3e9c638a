"""What the session layer lends a running tool, typed: the todo list, the people behind the session,
subagents, and the plugins' additions to a command's environment.

The tools depend on these protocols, never on the session, the store or the plugins; the session
layer implements them (session/channels: `StoreTodos`, `TenantQuestions`, `SessionSubagents`) and
puts them in the tool context's `services`. A service that is None is not offered where the tool
runs (a user's request, a subagent's task): the tool says so to the model instead of doing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class TodoList(Protocol):
    """A session's todo list, as the session layer stores it."""

    async def read(self, session_id: str) -> list[dict[str, Any]]: ...

    async def write(self, session_id: str, todos: list[dict[str, Any]]) -> None: ...


class QuestionAsker(Protocol):
    """Asks the people behind a session; raises QuestionRejectedError when they dismiss it."""

    async def ask(
        self, session_id: str, questions: list[dict[str, Any]], *, message_id: str, call_id: str
    ) -> list[list[str]]: ...


@dataclass(frozen=True, slots=True)
class ChildSession:
    """The session a subagent runs in, and the model it runs with."""

    id: str
    provider_id: str
    model_id: str


class Subagents(Protocol):
    """What the task tool needs from the session layer."""

    def exists(self, agent: str) -> bool: ...

    async def open_child(
        self, *, parent_id: str, task_id: str | None, description: str, agent: str
    ) -> ChildSession:
        """Resume the child `task_id` of `parent_id`, or create a new child session."""
        ...

    async def run(self, child: ChildSession, *, agent: str, prompt: str) -> str:
        """Run the subagent's turn in the child session; the text of its final message."""
        ...

    async def cancel(self, child_id: str) -> None:
        """Stop the child's turn and wait until it has cleaned up."""
        ...


class ShellEnvHook(Protocol):
    """Variables plugins add to a command run in `cwd` (KERNEL 9 `shell.env`)."""

    async def __call__(self, cwd: Path, *, session_id: str, call_id: str | None) -> dict[str, str]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolServices:
    """The services of one tool call. `subagent_chosen`: a person picked the subagent (an @agent
    mention, a command, a subtask part), so the task tool asks no `task` permission."""

    todos: TodoList | None = None
    questions: QuestionAsker | None = None
    subagents: Subagents | None = None
    shell_env: ShellEnvHook | None = None
    subagent_chosen: bool = False


# Nothing lent: the tools that need a service refuse with a message, the others run as usual.
NO_SERVICES = ToolServices()
