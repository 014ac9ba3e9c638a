"""What the writer expects of a tool part's row before writing it (store/last_written.py)."""

from __future__ import annotations

from typing import Any

from agentforge.store.direct import NEW, ExpectedRow
from agentforge.store.last_written import LastWritten


def _tool(part_id: str, status: str) -> dict[str, Any]:
    return {"id": part_id, "type": "tool", "state": {"status": status}}


def test_a_part_never_written_is_expected_new_only_in_its_first_state() -> None:
    written = LastWritten()
    assert written.expected("t", _tool("prt_a", "pending")) == NEW
    for status in ("running", "completed", "error"):
        assert written.expected("t", _tool("prt_a", status)) is None, "unknown: read"
    assert written.expected("t", {"id": "prt_a", "type": "tool"}) is None


def test_the_data_last_written_is_expected_until_the_last_state() -> None:
    written = LastWritten()
    written.wrote("t", _tool("prt_a", "pending"), "pending data")
    assert written.expected("t", _tool("prt_a", "running")) == ExpectedRow("pending data")
    assert written.expected("t", _tool("prt_a", "pending")) == ExpectedRow("pending data"), "written again"
    assert written.expected("other", _tool("prt_a", "running")) is None, "per tenant"
    written.wrote("t", _tool("prt_a", "running"), "running data")
    assert written.expected("t", _tool("prt_a", "completed")) == ExpectedRow("running data")
    written.wrote("t", _tool("prt_a", "completed"), "completed data")
    assert written.expected("t", _tool("prt_a", "completed")) is None, "forgotten: read"
    assert len(written) == 0


def test_past_its_capacity_the_oldest_part_is_forgotten() -> None:
    written = LastWritten(capacity=2)
    for name in ("prt_a", "prt_b", "prt_c"):
        written.wrote("t", _tool(name, "running"), name)
    written.wrote("t", _tool("prt_b", "running"), "b again")  # now the newest
    written.wrote("t", _tool("prt_d", "running"), "prt_d")
    names = ("prt_a", "prt_b", "prt_c", "prt_d")
    assert [written.expected("t", _tool(name, "running")) for name in names] == [
        None,
        ExpectedRow("b again"),
        None,
        ExpectedRow("prt_d"),
    ]


def test_what_is_kept_is_bounded_in_characters_too() -> None:
    written = LastWritten(capacity=10, max_chars=10)
    written.wrote("t", _tool("prt_a", "running"), "a" * 5)
    written.wrote("t", _tool("prt_b", "running"), "b" * 6)  # 11 characters: the oldest goes
    written.wrote("t", _tool("prt_c", "running"), "c" * 11)  # larger than all may be: not kept
    assert [written.expected("t", _tool(name, "running")) for name in ("prt_a", "prt_b", "prt_c")] == [
        None,
        ExpectedRow("b" * 6),
        None,
    ]
    written.wrote("t", _tool("prt_b", "running"), "b" * 4)
    written.wrote("t", _tool("prt_d", "running"), "d" * 6)  # 10 in all: both kept
    assert len(written) == 2
