"""Errors of the plugin system."""

from __future__ import annotations


class PluginError(Exception):
    """A plugin misbehaved when a hook was called (returned the wrong kind of value)."""


class PluginLoadError(PluginError):
    """A plugin could not be found, imported or registered. The message names the plugin."""

    def __init__(self, plugin: str, reason: str) -> None:
        super().__init__(f"Plugin {plugin!r} could not be loaded: {reason}")
        self.plugin = plugin
        self.reason = reason
