"""`Kept`: what a conversion made of an object, kept for as long as the object lives.

Every model call converts its whole conversation twice: the session's history into model messages
(session/context/history.py), and those into a provider's wire form (the adapters). Between one call
and the next almost every object converted is the same object, unchanged: history is shared between
reads and never changed in place (store/parsed.py, store/history_cache.py), and its model messages
are kept with it here. Converting each once instead of once per call takes work off the event loop
that grew with a session's length (a 450-message session: ~1.2 ms a call).

Entries are found by the object's identity (with the conversion's options) and dropped by a weak
reference's callback when the object is collected, so an entry never outlives its object and an id
reused by a later object never finds it. What is converted must not change in place afterwards, and
what the conversion returns is shared by every caller: both are read-only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

_T = TypeVar("_T")
_O = TypeVar("_O", bound=Hashable)
_R = TypeVar("_R")


class Kept(Generic[_T, _O, _R]):
    """`convert(item, options)` for live objects, each computed once per (object, options)."""

    def __init__(self, convert: Callable[[_T, _O], _R]) -> None:
        self._convert = convert
        # options -> id(object) -> (the object, weakly; its conversion)
        self._kept: dict[_O, dict[int, tuple[weakref.ref[_T], _R]]] = {}

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._kept.values())

    def get(self, item: _T, options: _O) -> _R:
        return self.getter(options)(item)

    def getter(self, options: _O) -> Callable[[_T], _R]:
        """`get` with `options` bound: a whole conversation's look-ups without a call per object
        in between."""
        kept = self._kept.get(options)
        if kept is None:
            kept = self._kept[options] = {}
        convert = self._convert

        def get(item: _T) -> _R:
            key = id(item)
            hit = kept.get(key)
            if hit is not None and hit[0]() is item:
                return hit[1]
            converted = convert(item, options)
            kept[key] = (weakref.ref(item, lambda _: kept.pop(key, None)), converted)
            return converted

        return get
