"""Compaction rules without a server: overflow detection (KERNEL 6.1), the effective history with a
preserved tail (6.4 [newer]), tail selection and the overflow replay (6.3)."""

from __future__ import annotations

import pytest

from agentforge.config import Config, ConfigError
from agentforge.llm.provider import ResolvedModel
from agentforge.model import ids
from agentforge.model.message import WithParts
from agentforge.model.part import CacheTokens, CompactionPart, Tokens
from agentforge.session.context.compaction import (
    CompactionConfig,
    is_overflow,
    preserve_budget,
    split_replay,
    tail_start,
    usable_tokens,
)
from agentforge.session.context.history import filter_compacted
from tests.session.builders import Conversation, compaction


def model(context: int, output: int, input: int | None = None) -> ResolvedModel:
    return ResolvedModel(
        provider_id="fake",
        model_id="test-model",
        api="openai",
        base_url="http://127.0.0.1:1/v1",
        api_key="",
        headers={},
        timeout=None,
        limit_context=context,
        limit_output=output,
        limit_input=input,
    )


AUTO = CompactionConfig()


def test_usable_context_leaves_room_for_the_output() -> None:
    assert usable_tokens(model(100_000, 4_000), AUTO) == 96_000
    # Output counts at most OUTPUT_TOKEN_MAX; a declared input limit keeps a reserve instead.
    assert usable_tokens(model(200_000, 64_000), AUTO) == 168_000
    assert usable_tokens(model(200_000, 64_000, input=150_000), AUTO) == 130_000
    assert usable_tokens(model(200_000, 4_000, input=150_000), CompactionConfig(reserved=1_000)) == 149_000
    assert usable_tokens(model(0, 4_000), AUTO) == 0


def test_overflow_counts_the_total_or_the_sum_of_kinds() -> None:
    small = model(10_000, 1_000)
    assert is_overflow(Tokens(total=9_000), small, AUTO)
    assert not is_overflow(Tokens(total=8_999), small, AUTO)
    # Without a total: input + output + cache, reasoning not added.
    assert is_overflow(Tokens(input=8_000, output=500, cache=CacheTokens(read=400, write=100)), small, AUTO)
    assert not is_overflow(Tokens(input=8_000, output=500, reasoning=5_000), small, AUTO)


def test_overflow_is_off_without_a_known_context_or_with_auto_false() -> None:
    assert not is_overflow(Tokens(total=10**9), model(0, 4_000), AUTO)
    assert not is_overflow(Tokens(total=10**9), model(10_000, 1_000), CompactionConfig(auto=False))


def test_config_section_is_read_and_checked() -> None:
    config = Config.model_validate({"compaction": {"auto": False, "prune": False, "tail_turns": 1}})
    read = CompactionConfig.of(config)
    assert (read.auto, read.prune, read.tail_turns) == (False, False, 1)
    assert CompactionConfig.of(Config()) == CompactionConfig()
    with pytest.raises(ConfigError):
        CompactionConfig.of(Config.model_validate({"compaction": {"tail_turns": -1}}))


def test_preserve_budget_is_a_clamped_quarter_of_usable() -> None:
    assert preserve_budget(model(10_000, 1_000), AUTO) == 2_250
    assert preserve_budget(model(4_000, 1_000), AUTO) == 2_000
    assert preserve_budget(model(200_000, 8_000), AUTO) == 8_000
    assert preserve_budget(model(200_000, 8_000), CompactionConfig(preserve_recent_tokens=123)) == 123


def _ids(messages: list[WithParts]) -> list[str]:
    return [m.info.id for m in messages]


def test_filter_compacted_puts_the_preserved_tail_after_the_summary() -> None:
    chat = Conversation()
    chat.user("first")
    chat.assistant("one")
    u2 = chat.user("second")
    a2 = chat.assistant("two")
    u3 = chat.user("third")
    a3 = chat.assistant("three")
    request = chat.user(CompactionPart(**_part_ids(), auto=True, tail_start_id=u2.info.id))
    summary = chat.assistant("the summary", parent=request, summary=True)
    after = chat.user("Continue")
    effective = filter_compacted(chat.messages)
    assert _ids(effective) == _ids([request, summary, u2, a2, u3, a3, after])


def test_filter_compacted_drops_the_replayed_request_from_the_tail() -> None:
    chat = Conversation()
    chat.user("first")
    chat.assistant("one")
    u2 = chat.user("second")
    a2 = chat.assistant("two")
    chat.user("third, too long")
    chat.assistant(finish=None)  # the attempt the provider refused
    request = chat.user(CompactionPart(**_part_ids(), auto=True, overflow=True, tail_start_id=u2.info.id))
    summary = chat.assistant("the summary", parent=request, summary=True)
    replayed = chat.user("third, too long")
    effective = filter_compacted(chat.messages)
    assert _ids(effective) == _ids([request, summary, u2, a2, replayed])


def test_a_failed_or_running_summary_hides_nothing() -> None:
    chat = Conversation()
    chat.user("first")
    chat.assistant("one")
    request = chat.user(compaction(auto=True))
    chat.assistant(parent=request, summary=True, finish=None)
    assert filter_compacted(chat.messages) == chat.messages


def test_tail_keeps_the_newest_turns_that_fit_and_never_everything() -> None:
    chat = Conversation()
    for index in range(4):
        chat.user(f"question {index}")
        chat.assistant(f"answer {index}")
    messages = chat.messages
    assert tail_start(messages, 2, 10_000) == 4  # the last two of four turns
    assert tail_start(messages, 10, 10_000) == 2  # all but the oldest turn
    assert tail_start(messages, 0, 10_000) is None
    big = Conversation()
    big.user("old")
    big.assistant("x" * 4_000)
    big.user("recent")
    big.assistant("y" * 40_000)
    assert tail_start(big.messages, 2, 2_000) is None  # the only candidate turn is over budget


def test_tail_never_reaches_back_past_an_earlier_compaction() -> None:
    chat = Conversation()
    chat.user("before")
    request = chat.user(compaction(auto=True))
    chat.assistant("summary", parent=request, summary=True)
    chat.user("q1")
    chat.assistant("a1")
    chat.user("q2")
    chat.assistant("a2")
    # The turns after the old compaction: q1 stays with the head, q2 is the tail.
    assert tail_start(chat.messages, 5, 10_000) == 5


def test_replay_is_the_newest_user_message_unless_nothing_would_remain() -> None:
    chat = Conversation()
    chat.user("first")
    chat.assistant("one")
    second = chat.user("second")
    chat.assistant(finish=None)
    head, replay = split_replay(chat.messages)
    assert replay is not None and replay.info.id == second.info.id
    assert len(head) == 2
    lonely = Conversation()
    lonely.user("only")
    head, replay = split_replay(lonely.messages)
    assert replay is None and head == lonely.messages


def _part_ids() -> dict[str, str]:
    return {"id": ids.ascending("prt"), "session_id": "ses_x", "message_id": "msg_x"}
