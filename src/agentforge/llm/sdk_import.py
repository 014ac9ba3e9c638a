"""Provider SDKs imported off the event loop, one at a time: an SDK import takes hundreds of
milliseconds (the openai package alone ~0.4 s), which would block every other session meanwhile."""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from types import ModuleType

_IMPORTING = threading.Lock()


async def import_off_loop(name: str) -> ModuleType:
    """The module `name`, imported in a thread the first time."""
    loaded = sys.modules.get(name)
    # A module another call is importing right now is in sys.modules too, half-initialised.
    if loaded is not None and not getattr(loaded.__spec__, "_initializing", False):
        return loaded
    return await asyncio.to_thread(_import, name)


def _import(name: str) -> ModuleType:
    # One import at a time: two threads importing SDKs that share modules can deadlock, which
    # Python resolves by handing one of them a half-initialised module.
    with _IMPORTING:
        return importlib.import_module(name)
