"""Which tool outputs pruning marks (KERNEL 6.6), without a server."""

from __future__ import annotations

from agentforge.model.part import ToolPart, ToolStateCompleted
from agentforge.session.context.prune import (
    PRUNE_MINIMUM,
    PRUNE_PROTECT,
    mark_pruned,
    may_prune,
    prunable_parts,
)
from tests.session.builders import Conversation, compaction, tool_completed

TOKEN = "abcd"  # estimate: one token per four characters


def output(tokens: int) -> str:
    return TOKEN * tokens


def test_old_outputs_beyond_the_protected_window_are_selected() -> None:
    chat = Conversation()
    chat.user("one")
    oldest = tool_completed("read", {}, output(30_000))
    chat.assistant(oldest, tool_completed("skill", {}, output(50_000)))
    chat.user("two")
    protected = tool_completed("read", {}, output(30_000))
    chat.assistant(protected)
    chat.user("three")
    recent = tool_completed("bash", {}, output(100_000))
    chat.assistant(recent)
    chat.user("four")
    chat.assistant("done")
    selected = prunable_parts(chat.messages)
    # The two newest turns never count; `skill` is protected; 30k + 30k passes PRUNE_PROTECT (40k).
    assert [p.id for p in selected] == [chat.messages[1].parts[0].id]
    assert PRUNE_PROTECT < 60_000 and PRUNE_MINIMUM < 30_000


def test_nothing_is_selected_below_the_minimum() -> None:
    chat = Conversation()
    for _ in range(3):
        chat.user("go")
        chat.assistant(tool_completed("read", {}, output(15_000)))
    chat.user("last")
    chat.assistant("done")
    chat.user("now")
    # 15k + 15k + 15k: 5k over the protected 40k, under the 20k minimum.
    assert prunable_parts(chat.messages) == []


def test_walk_stops_at_a_summary_and_at_outputs_already_pruned() -> None:
    chat = Conversation()
    chat.user("old")
    chat.assistant(tool_completed("read", {}, output(100_000)))
    request = chat.user(compaction(auto=True))
    chat.assistant("summary", parent=request, summary=True)
    chat.user("a")
    chat.assistant(tool_completed("read", {}, output(10_000)))
    chat.user("b")
    chat.user("c")
    assert prunable_parts(chat.messages) == []

    pruned = Conversation()
    pruned.user("x")
    pruned.assistant(tool_completed("read", {}, output(100_000)))
    pruned.user("y")
    pruned.assistant(tool_completed("read", {}, output(100_000), compacted=1))
    pruned.user("z")
    pruned.assistant(tool_completed("read", {}, output(45_000)), tool_completed("read", {}, output(25_000)))
    pruned.user("w")
    pruned.user("v")
    selected = prunable_parts(pruned.messages)
    # Only the newest turn's two outputs are before the first pruned one; 25k is over 40k with 45k.
    assert [p.id for p in selected] == [pruned.messages[5].parts[0].id]


def test_marking_keeps_the_output_and_sets_compacted() -> None:
    part = tool_completed("read", {}, "data")
    marked = mark_pruned(part, 123)
    assert isinstance(marked, ToolPart) and isinstance(marked.state, ToolStateCompleted)
    assert marked.state.output == "data" and marked.state.time.compacted == 123
    assert marked.id == part.id


def test_may_prune_is_false_only_when_nothing_could_be_selected() -> None:
    # The loop skips pruning's history read when what it saw cannot hold enough tool output.
    for sizes in ([15_000] * 3, [30_000, 30_000, 100_000], [20_000] * 4, [10_000] * 7, [61_000], []):
        chat = Conversation()
        for size in sizes:
            chat.user("go")
            chat.assistant(tool_completed("read", {}, output(size)))
        chat.user("last")
        chat.assistant("done")
        chat.user("now")
        assert may_prune(chat.messages) == (sum(sizes) > PRUNE_PROTECT + PRUNE_MINIMUM)
        if prunable_parts(chat.messages):
            assert may_prune(chat.messages)
