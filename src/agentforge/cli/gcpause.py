"""The cyclic garbage collector paused while a command starts.

Starting builds ~200,000 objects that live as long as the process (modules, classes, pydantic's
schemas, the routes), and with the collector on, its passes over them cost 10-20% of the CPU of a
start. `agentforge` pauses it from its entry until the command is ready (`serve`: listening; an
in-process server: its lifespan started; any other command: its module imported), then moves what
exists out of the collector's sight (`gc.freeze`) and lets it run as usual. Unfrozen, the first
collection after start-up would go through all of those objects once (~0.2 s, during a request).
What start-up left unreachable in cycles stays frozen: ~2,000 objects, once.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop the collector until `resume` (nothing when it is already off: someone else's choice)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Freeze what exists and start the collector again, if `pause` stopped it; else nothing."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
