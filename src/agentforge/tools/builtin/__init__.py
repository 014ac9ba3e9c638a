"""The built-in tools, one module each.

(`builtin_tools` lives in `catalog`: importing the `list` and `glob` submodules binds those names
in this package's namespace, shadowing the builtins here.)
"""

from agentforge.tools.builtin.apply_patch import ApplyPatchTool
from agentforge.tools.builtin.bash import BashTool
from agentforge.tools.builtin.catalog import builtin_tools
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

__all__ = [
    "ApplyPatchTool",
    "BashTool",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "InvalidTool",
    "ListTool",
    "QuestionTool",
    "ReadTool",
    "TaskTool",
    "TodoReadTool",
    "TodoWriteTool",
    "WebFetchTool",
    "WriteTool",
    "builtin_tools",
]
