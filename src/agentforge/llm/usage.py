"""Token accounting and cost of one step (KERNEL 5.8)."""

from __future__ import annotations

import math
from decimal import Decimal

from agentforge.llm.events import Usage
from agentforge.llm.provider import ResolvedModel
from agentforge.model.part import CacheTokens, Tokens

_PER_MILLION = Decimal(1_000_000)
# Prompts longer than this are billed at a model's long-context tier, when it has one.
LONG_PROMPT_TOKENS = 200_000


def step_usage(model: ResolvedModel, usage: Usage) -> tuple[Tokens, float]:
    """Tokens as we record them, and the step's cost in USD.

    Providers count cached prompt tokens inside the input and reasoning tokens inside the output; we
    record each kind once: `input` excludes cache reads and writes, `output` excludes reasoning.
    Reasoning is priced as output. Decimal arithmetic keeps sums of tiny costs exact.
    """
    input_tokens = _count(usage.input_tokens)
    output_tokens = _count(usage.output_tokens)
    reasoning = _count(usage.reasoning_tokens)
    cache_read = _count(usage.cached_input_tokens)
    cache_write = _count(usage.cache_write_tokens)
    tokens = Tokens(
        total=_count(usage.total_tokens) if usage.total_tokens is not None else None,
        input=max(0, input_tokens - cache_read - cache_write),
        output=max(0, output_tokens - reasoning),
        reasoning=reasoning,
        cache=CacheTokens(read=cache_read, write=cache_write),
    )
    return tokens, float(_cost(model, tokens))


def _cost(model: ResolvedModel, tokens: Tokens) -> Decimal:
    price = model.cost
    prompt = tokens.input + tokens.cache.read + tokens.cache.write
    if price.over_200k is not None and prompt > LONG_PROMPT_TOKENS:
        # The provider bills the whole request (output included) at the higher tier.
        price = price.over_200k
    total = (
        tokens.input * _price(price.input)
        + tokens.output * _price(price.output)
        + tokens.cache.read * _price(price.cache_read)
        + tokens.cache.write * _price(price.cache_write)
        + tokens.reasoning * _price(price.output)
    )
    return total / _PER_MILLION


def _price(per_million: float) -> Decimal:
    # str() first: Decimal(0.1) would carry the binary float's error into the sum.
    return Decimal(str(per_million)) if math.isfinite(per_million) and per_million > 0 else Decimal(0)


def _count(value: object) -> int:
    """A token count as a finite non-negative int (providers do send nulls, negatives and floats)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if not math.isfinite(value) or value <= 0:
        return 0
    return int(value)
