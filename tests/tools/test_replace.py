from __future__ import annotations

import pytest

from agentforge.tools.base import ToolError
from agentforge.tools.replace import (
    IDENTICAL,
    MULTIPLE,
    NOT_FOUND,
    block_anchor,
    context_aware,
    escape_normalized,
    indentation_flexible,
    levenshtein,
    line_trimmed,
    replace,
    trimmed_boundary,
    whitespace_normalized,
)

CODE = """def greet(name):
    message = "hello " + name
    print(message)
    return message


def leave(name):
    print("bye " + name)
"""


def test_levenshtein() -> None:
    assert levenshtein("", "abc") == 3
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("same", "same") == 0


def test_exact_match_replaces_once() -> None:
    assert replace("a b c", "b", "B") == "a B c"


def test_identical_strings_are_rejected() -> None:
    with pytest.raises(ToolError, match=IDENTICAL):
        replace("abc", "b", "b")


def test_not_found_message() -> None:
    with pytest.raises(ToolError) as caught:
        replace(CODE, "does not exist anywhere", "x")
    assert str(caught.value) == NOT_FOUND


def test_ambiguous_match_needs_more_context() -> None:
    with pytest.raises(ToolError) as caught:
        replace(CODE, "print(", "log(")
    assert str(caught.value) == MULTIPLE


def test_replace_all_replaces_every_occurrence() -> None:
    assert replace("x = 1\ny = x\nz = x", "x", "w", replace_all=True) == "w = 1\ny = w\nz = w"


def test_line_trimmed_ignores_per_line_indentation() -> None:
    find = 'message = "hello " + name\nprint(message)'
    assert list(line_trimmed(CODE, find)) == ['    message = "hello " + name\n    print(message)']
    # The matched block includes its indentation, so newString replaces it whole.
    out = replace(CODE, find, "    message = name\n    print(message)")
    assert out.startswith("def greet(name):\n    message = name\n    print(message)\n    return")


def test_block_anchor_tolerates_a_different_middle_line() -> None:
    find = "def greet(name):\n    msg = 'hi ' + name\n    print(message)\n    return message"
    [block] = block_anchor(CODE, find)
    assert block.startswith("def greet(name):") and block.endswith("return message")
    out = replace(CODE, find, "def greet(name):\n    return name")
    assert out.startswith("def greet(name):\n    return name\n\n\ndef leave")


def test_block_anchor_picks_most_similar_of_several_candidates() -> None:
    content = "start\nalpha one\nend\nstart\nbeta two\nend\n"
    [block] = block_anchor(content, "start\nbeta too\nend")
    assert block == "start\nbeta two\nend"
    # With several candidates the best one must reach the similarity threshold.
    assert list(block_anchor(content, "start\nzzzzzzzzzzzzz\nend")) == []


def test_whitespace_normalized_matches_collapsed_runs() -> None:
    content = "x  =   compute( a,  b )\n"
    assert list(whitespace_normalized(content, "x = compute( a, b )")) == ["x  =   compute( a,  b )"]
    assert replace(content, "x = compute( a, b )", "x = 0") == "x = 0\n"


def test_whitespace_normalized_finds_a_fragment_inside_a_line() -> None:
    content = "result = call(first,   second)  # note\n"
    assert "call(first,   second)" in list(whitespace_normalized(content, "call(first, second)"))


def test_indentation_flexible_matches_dedented_block() -> None:
    content = "class A:\n    def f(self):\n        return 1\n"
    find = "def f(self):\n    return 1"
    assert list(indentation_flexible(content, find)) == ["    def f(self):\n        return 1"]


def test_escape_normalized_handles_literal_escapes() -> None:
    content = 'print("a")\nprint("b")\n'
    find = 'print(\\"a\\")\\nprint(\\"b\\")'
    assert 'print("a")\nprint("b")' in list(escape_normalized(content, find))
    assert replace(content, find, "pass") == "pass\n"


def test_trimmed_boundary_ignores_surrounding_whitespace() -> None:
    content = "alpha\nbeta\ngamma\n"
    assert next(trimmed_boundary(content, "\n  beta  \n")) == "beta"
    assert list(trimmed_boundary(content, "beta")) == []  # nothing to trim: not this matcher's job


def test_context_aware_needs_half_the_middle_lines() -> None:
    content = "begin\n  one\n  two\n  three\nfinish\n"
    good = "begin\none\ntwo\nCHANGED\nfinish"
    bad = "begin\nX\nY\nthree\nfinish"
    assert list(context_aware(content, good)) == ["begin\n  one\n  two\n  three\nfinish"]
    assert list(context_aware(content, bad)) == []


def test_stricter_matchers_win() -> None:
    # The exact text occurs once; the looser matchers must not replace a different spot.
    content = "  value = 1\nvalue = 1\n"
    assert replace(content, "  value = 1", "  value = 2") == "  value = 2\nvalue = 1\n"


def test_trailing_newline_in_old_string_is_tolerated() -> None:
    content = "    a = 1\n    b = 2\nrest\n"
    out = replace(content, "a = 1\nb = 2\n", "a = 3\nb = 4")
    assert out == "a = 3\nb = 4\nrest\n"
