"""The `todowrite` and `todoread` tools (KERNEL 7.7): the session's task list, kept by the store.

The tools reach the list through `ctx.services.todos`, a service the session layer lends them
(`agentforge.session.channels.todos.StoreTodos`), so the tools do not depend on the store.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import Field

from agentforge.tools.base import PermissionRequest, Tool, ToolContext, ToolError, ToolResult
from agentforge.tools.params import ToolParams
from agentforge.tools.services import TodoList

TodoStatus = Literal["pending", "in_progress", "completed", "cancelled"]
TodoPriority = Literal["high", "medium", "low"]

WRITE_DESCRIPTION = """Use this tool to create and manage a structured task list for your current \
session. It helps you track progress, organise complex tasks, and show the user how the work is going.

When to use it:
- Complex multi-step tasks (3 or more distinct steps)
- The user gives you several things to do, or asks for a todo list
- After receiving new instructions: capture them as todos
- When you start a task, mark it in_progress (ideally only one at a time); mark it completed as soon \
as it is done, and add any follow-up tasks you discover

When not to use it: a single, trivial task that needs no tracking.

Each call replaces the whole list: send every todo, not only the ones that changed.
Statuses: pending, in_progress, completed, cancelled (no longer needed). Priorities: high, medium, low."""

READ_DESCRIPTION = """Use this tool to read the current todo list of the session. Use it often to \
check what is pending, what you are working on, and what is done. Takes no parameters."""


class TodoItem(ToolParams):
    content: str = Field(min_length=1, description="Brief description of the task")
    status: TodoStatus = Field(description="Current status: pending, in_progress, completed or cancelled")
    priority: TodoPriority = Field(description="Priority of the task: high, medium or low")


class TodoWriteParams(ToolParams):
    todos: list[TodoItem] = Field(description="The updated todo list")


class TodoReadParams(ToolParams):
    pass


def todo_list(ctx: ToolContext) -> TodoList:
    found = ctx.services.todos
    if found is None:
        raise ToolError("The todo list is not available here (this tool runs only inside a session).")
    return found


def _result(todos: list[dict[str, Any]]) -> ToolResult:
    open_count = sum(1 for todo in todos if todo.get("status") != "completed")
    return ToolResult(
        title=f"{open_count} todos",
        output=orjson.dumps(todos, option=orjson.OPT_INDENT_2).decode(),
        metadata={"todos": todos},
    )


class TodoWriteTool(Tool[TodoWriteParams]):
    id = "todowrite"
    changes_files = False  # the session's todo list, not a file
    description = WRITE_DESCRIPTION
    parameters = TodoWriteParams

    async def execute(self, args: TodoWriteParams, ctx: ToolContext) -> ToolResult:
        todos = todo_list(ctx)
        await ctx.ask(PermissionRequest(permission="todowrite", patterns=["*"], always=["*"]))
        items = [item.model_dump(mode="json") for item in args.todos]
        await todos.write(ctx.session_id, items)
        return _result(items)


class TodoReadTool(Tool[TodoReadParams]):
    id = "todoread"
    changes_files = False  # the session's todo list, not a file
    description = READ_DESCRIPTION
    parameters = TodoReadParams

    async def execute(self, args: TodoReadParams, ctx: ToolContext) -> ToolResult:
        todos = todo_list(ctx)
        await ctx.ask(PermissionRequest(permission="todoread", patterns=["*"], always=["*"]))
        return _result(await todos.read(ctx.session_id))
