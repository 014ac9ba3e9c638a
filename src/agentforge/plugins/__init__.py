"""Plugins (pluggy, project "agentforge"): hook specifications, the manager that calls them, loading.

A plugin is a module (or object) with functions marked `@hookimpl`, named after the hooks in
`hookspecs`; it is loaded from an installed package's `agentforge.plugins` entry point or from the
config's `plugin` list. The built-in tools register through the same `register_tools` hook.
"""

from agentforge.plugins.errors import PluginError, PluginLoadError
from agentforge.plugins.hookspecs import (
    ChatHeaders,
    ChatMessage,
    ChatParams,
    Messages,
    PermissionDecision,
    PermissionStatus,
    ShellEnv,
    SystemPrompt,
    ToolArgs,
    ToolDefinition,
    ToolOutput,
    hookimpl,
)
from agentforge.plugins.manager import PluginManager

__all__ = [
    "ChatHeaders",
    "ChatMessage",
    "ChatParams",
    "Messages",
    "PermissionDecision",
    "PermissionStatus",
    "PluginError",
    "PluginLoadError",
    "PluginManager",
    "ShellEnv",
    "SystemPrompt",
    "ToolArgs",
    "ToolDefinition",
    "ToolOutput",
    "hookimpl",
]
