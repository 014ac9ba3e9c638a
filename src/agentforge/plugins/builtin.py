"""The built-in plugin: the built-in tools, registered through the same hook user plugins use."""

from __future__ import annotations

from typing import Any

from agentforge.plugins.hookspecs import hookimpl
from agentforge.tools.base import Tool
from agentforge.tools.builtin import builtin_tools


# tryfirst: built-ins are the base every other plugin's tools may replace.
@hookimpl(tryfirst=True)
def register_tools() -> list[Tool[Any]]:
    return builtin_tools()
