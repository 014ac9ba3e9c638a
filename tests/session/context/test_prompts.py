"""The provider prompt follows the model family; an agent's own prompt replaces it."""

from __future__ import annotations

import pytest

from agentforge.session.context import prompts


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-5-mini", prompts.CODEX),
        ("openai/gpt-5", prompts.CODEX),
        ("gpt-4.1", prompts.BEAST),
        ("o3-mini", prompts.BEAST),
        ("o1", prompts.BEAST),
        ("gemini-2.5-pro", prompts.GEMINI),
        ("claude-sonnet-4-5", prompts.ANTHROPIC),
        ("anthropic/Claude-Opus", prompts.ANTHROPIC),
        ("qwen3-coder", prompts.DEFAULT),
        ("kimi-turbo1", prompts.DEFAULT),
        ("test-model", prompts.DEFAULT),
    ],
)
def test_prompt_by_model_family(model: str, expected: str) -> None:
    assert prompts.provider_prompt(model) == expected


def test_prompts_are_distinct() -> None:
    family = [prompts.DEFAULT, prompts.CODEX, prompts.BEAST, prompts.GEMINI, prompts.ANTHROPIC]
    assert len(set(family)) == len(family)
