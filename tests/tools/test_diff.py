from __future__ import annotations

from agentforge.tools.diff import file_diff, unified_diff


def test_unified_diff_counts_changes() -> None:
    diff = file_diff("a.txt", "one\ntwo\nthree\n", "one\n2\nthree\nfour\n")
    assert diff.additions == 2
    assert diff.deletions == 1
    assert diff.patch.startswith("--- a.txt\n+++ a.txt\n@@")
    assert "-two\n+2\n" in diff.patch
    assert diff.wire() == {"file": "a.txt", "patch": diff.patch, "additions": 2, "deletions": 1}


def test_missing_final_newline_is_marked() -> None:
    patch = unified_diff("a.txt", "x", "y")
    assert patch.endswith("-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n")


def test_content_lines_that_look_like_headers_are_counted() -> None:
    diff = file_diff("a.txt", "--- old\n", "+++ new\n")
    assert (diff.additions, diff.deletions) == (1, 1)


def test_no_change_gives_empty_patch() -> None:
    assert file_diff("a.txt", "same\n", "same\n").patch == ""
