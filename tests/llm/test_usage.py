"""Step usage and cost (KERNEL 5.8), checked against hand-computed values."""

from __future__ import annotations

import math

from agentforge.llm.events import Usage
from agentforge.llm.provider import Cost, ResolvedModel
from agentforge.llm.usage import step_usage
from agentforge.model.part import CacheTokens, Tokens


def priced(cost: Cost) -> ResolvedModel:
    return ResolvedModel(
        provider_id="p",
        model_id="m",
        api="openai",
        base_url="http://x/v1",
        api_key="",
        headers={},
        timeout=None,
        limit_context=200_000,
        limit_output=64_000,
        limit_input=None,
        cost=cost,
    )


SONNET = priced(Cost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75))


def test_tokens_split_cached_and_reasoning_out() -> None:
    usage = Usage(
        input_tokens=12_000,
        output_tokens=1_500,
        reasoning_tokens=500,
        cached_input_tokens=8_000,
        cache_write_tokens=2_000,
        total_tokens=13_500,
    )
    tokens, cost = step_usage(SONNET, usage)

    assert tokens == Tokens(
        total=13_500, input=2_000, output=1_000, reasoning=500, cache=CacheTokens(read=8_000, write=2_000)
    )
    # 2000*3 + 1000*15 + 8000*0.3 + 2000*3.75 + 500*15 = 6000 + 15000 + 2400 + 7500 + 7500 = 38400 per 1M
    assert cost == 0.0384


def test_cost_is_exact_for_small_prices() -> None:
    model = priced(Cost(input=0.1, output=0.2))
    _, cost = step_usage(model, Usage(input_tokens=3, output_tokens=3))
    # 3*0.1 + 3*0.2 = 0.9 per 1M; in binary floats 0.1*3 + 0.2*3 = 0.9000000000000001
    assert cost == 9e-07


def test_garbage_counts_are_clamped_to_zero() -> None:
    usage = Usage(input_tokens=-5, output_tokens=10, reasoning_tokens=25, cached_input_tokens=-1)
    usage.cache_write_tokens = math.nan  # type: ignore[assignment]  # providers do send junk
    tokens, cost = step_usage(SONNET, usage)
    assert tokens.input == 0
    assert tokens.output == 0  # reasoning larger than output never goes negative
    assert tokens.reasoning == 25
    assert tokens.cache == CacheTokens(read=0, write=0)
    assert tokens.total is None
    assert cost == 25 * 15 / 1_000_000


def test_free_model_costs_nothing() -> None:
    tokens, cost = step_usage(priced(Cost()), Usage(input_tokens=1000, output_tokens=1000, total_tokens=2000))
    assert (tokens.input, tokens.output, tokens.total) == (1000, 1000, 2000)
    assert cost == 0.0


LONG_SONNET = priced(
    Cost(
        input=3.0,
        output=15.0,
        cache_read=0.3,
        cache_write=3.75,
        over_200k=Cost(input=6.0, output=22.5, cache_read=0.6, cache_write=7.5),
    )
)


def test_a_prompt_over_200k_tokens_is_billed_at_the_long_context_tier() -> None:
    usage = Usage(input_tokens=250_000, output_tokens=2_000, cached_input_tokens=100_000)
    _, cost = step_usage(LONG_SONNET, usage)
    # 150000*6 + 2000*22.5 + 100000*0.6 = 900000 + 45000 + 60000 = 1005000 per 1M
    assert cost == 1.005


def test_a_prompt_of_exactly_200k_tokens_keeps_the_base_prices() -> None:
    usage = Usage(input_tokens=200_000, output_tokens=1_000, cached_input_tokens=50_000)
    _, cost = step_usage(LONG_SONNET, usage)
    # 150000*3 + 1000*15 + 50000*0.3 = 450000 + 15000 + 15000 = 480000 per 1M
    assert cost == 0.48
