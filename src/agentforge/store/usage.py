"""Step-finish usage: what one step-finish part adds to its session's running totals (KERNEL 2.2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

STEP_FINISH: Final = "step-finish"


@dataclass(frozen=True, slots=True)
class Usage:
    cost: float = 0.0
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.cost + other.cost,
            self.input + other.input,
            self.output + other.output,
            self.reasoning + other.reasoning,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    def __neg__(self) -> Usage:
        return Usage(
            -self.cost, -self.input, -self.output, -self.reasoning, -self.cache_read, -self.cache_write
        )

    def __sub__(self, other: Usage) -> Usage:
        return self + -other


NO_USAGE: Final = Usage()


def usage_of(part_data: Mapping[str, Any]) -> Usage:
    """A part's cost and tokens if it is a step-finish part (a wire dict), nothing otherwise."""
    if part_data.get("type") != STEP_FINISH:
        return NO_USAGE
    tokens = part_data.get("tokens") or {}
    cache = tokens.get("cache") or {}
    return Usage(
        cost=float(part_data.get("cost") or 0.0),
        input=int(tokens.get("input") or 0),
        output=int(tokens.get("output") or 0),
        reasoning=int(tokens.get("reasoning") or 0),
        cache_read=int(cache.get("read") or 0),
        cache_write=int(cache.get("write") or 0),
    )
