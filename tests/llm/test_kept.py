"""`Kept`: a conversion computed once per live object and options, dropped with the object."""

from __future__ import annotations

import gc
from dataclasses import dataclass

from agentforge.llm.kept import Kept


@dataclass(slots=True, weakref_slot=True)
class Item:
    text: str


def counting() -> tuple[Kept[Item, str, str], list[str]]:
    calls: list[str] = []

    def convert(item: Item, suffix: str) -> str:
        calls.append(item.text)
        return item.text + suffix

    return Kept(convert), calls


def test_an_object_is_converted_once_per_options() -> None:
    kept, calls = counting()
    item = Item("a")
    assert kept.get(item, "!") == "a!"
    assert kept.get(item, "!") == "a!"
    assert kept.get(item, "?") == "a?"
    assert calls == ["a", "a"]


def test_equal_objects_are_converted_each() -> None:
    kept, calls = counting()
    first, second = Item("a"), Item("a")
    kept.get(first, "")
    kept.get(second, "")
    assert calls == ["a", "a"]
    assert len(kept) == 2


def test_the_conversion_goes_with_its_object() -> None:
    kept, calls = counting()
    item = Item("a")
    kept.get(item, "")
    del item
    gc.collect()
    assert len(kept) == 0
    # Whatever object comes next (possibly at the same address) is converted afresh.
    assert kept.get(Item("b"), "") == "b"
    assert calls == ["a", "b"]
