"""Seams for testing Agent Forge and what is built on it (plugins, tools, clients).

- `ScriptedModel`, `Turn`: an in-process model the runtime runs against (testing/model.py).
- `scripted_runtime`, `scripted_settings`: a runtime whose only model is a scripted one.
- `FakeClock`: time that tests advance, for retry back-off and permission deadlines.
- `tool_context`, `unconfined`, `allow_all`, `refuse_outside`: tool contexts outside a session.
"""

from agentforge.testing.clock import FakeClock
from agentforge.testing.model import NoScriptLeftError, ScriptedModel, Turn
from agentforge.testing.runtime import (
    SCRIPTED_MODEL,
    SCRIPTED_PROVIDER,
    scripted_config,
    scripted_runtime,
    scripted_settings,
)
from agentforge.testing.tools import allow_all, refuse_outside, tool_context, unconfined

__all__ = [
    "SCRIPTED_MODEL",
    "SCRIPTED_PROVIDER",
    "FakeClock",
    "NoScriptLeftError",
    "ScriptedModel",
    "Turn",
    "allow_all",
    "refuse_outside",
    "scripted_config",
    "scripted_runtime",
    "scripted_settings",
    "tool_context",
    "unconfined",
]
