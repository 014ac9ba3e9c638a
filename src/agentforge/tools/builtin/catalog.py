"""The built-in tools, in the order KERNEL 7.2 lists them."""

from __future__ import annotations

from typing import Any

from agentforge.tools.base import Tool
from agentforge.tools.builtin.apply_patch import ApplyPatchTool
from agentforge.tools.builtin.bash import BashTool
from agentforge.tools.builtin.edit import EditTool
from agentforge.tools.builtin.glob import GlobTool
from agentforge.tools.builtin.grep import GrepTool
from agentforge.tools.builtin.invalid import InvalidTool
from agentforge.tools.builtin.list import ListTool
from agentforge.tools.builtin.question import QuestionTool
from agentforge.tools.builtin.read import ReadTool
from agentforge.tools.builtin.task import TaskTool
from agentforge.tools.builtin.todo import TodoReadTool, TodoWriteTool
from agentforge.tools.builtin.webfetch import WebFetchTool
from agentforge.tools.builtin.write import WriteTool


def builtin_tools() -> list[Tool[Any]]:
    """Fresh instances of every built-in tool."""
    return [
        InvalidTool(),
        QuestionTool(),
        BashTool(),
        ReadTool(),
        GlobTool(),
        GrepTool(),
        ListTool(),
        EditTool(),
        WriteTool(),
        TaskTool(),
        WebFetchTool(),
        TodoWriteTool(),
        TodoReadTool(),
        ApplyPatchTool(),
    ]
