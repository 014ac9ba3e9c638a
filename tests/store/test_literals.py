"""Array and text literals (store/literals.py) read back by Postgres as exactly the values written,
whatever characters they hold; values no literal can write exactly are refused, never mangled."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentforge.store.literals import array_literal, text_literal
from tests.databases import POSTGRES_URL_ENV

# Text Postgres can hold (no NUL) and UTF-8 encodes (no lone surrogate); quotes, backslashes and
# array syntax most of all.
_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("\"'\\{},;$ \t\nNULLnul")),
        st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),  # no NUL, no lone surrogate
    ),
    max_size=12,
)
_CASES = st.one_of(
    st.tuples(st.just("VARCHAR"), st.lists(st.one_of(st.none(), _TEXT), max_size=5)),
    st.tuples(
        st.just("BIGINT"), st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=5)
    ),
    st.tuples(
        st.just("FLOAT"),
        st.lists(st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)), max_size=5),
    ),
    st.tuples(st.just("BOOLEAN"), st.lists(st.one_of(st.none(), st.booleans()), max_size=5)),
)

Fetch = Callable[[str], Any]


@pytest.fixture
def fetch() -> Iterator[Fetch]:
    """Read one value through a Postgres connection of its own (no schema needed)."""
    url = os.environ.get(POSTGRES_URL_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_URL_ENV} is not set")
    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(asyncpg.connect(url))
    try:
        yield lambda sql: loop.run_until_complete(conn.fetchval(sql))
    finally:
        loop.run_until_complete(conn.close())
        loop.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_CASES)
def test_an_array_literal_reads_back_as_its_values(fetch: Fetch, case: tuple[str, list[Any]]) -> None:
    cast, values = case
    literal = array_literal(values, cast)
    assert literal is not None
    assert fetch(f"SELECT {literal}::{cast}[]") == values


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_TEXT)
def test_a_text_literal_reads_back_as_its_value(fetch: Fetch, value: str) -> None:
    literal = text_literal(value)
    assert literal is not None
    assert fetch(f"SELECT {literal}::text") == value


def test_a_literal_survives_either_setting_of_standard_conforming_strings(fetch: Fetch) -> None:
    values = ["a\\b", "c'd", 'e"f']
    literal = array_literal(values, "VARCHAR")
    try:
        fetch("SELECT set_config('standard_conforming_strings', 'off', false)")
        assert fetch(f"SELECT {literal}::VARCHAR[]") == values
    finally:
        fetch("SELECT set_config('standard_conforming_strings', 'on', false)")


def test_values_no_literal_writes_exactly_are_refused() -> None:
    assert array_literal(["a\x00b"], "VARCHAR") is None  # Postgres text holds no NUL; it would end the SQL
    assert text_literal("a\x00") is None
    assert array_literal(["é\ud800"], "VARCHAR") is None  # no UTF-8 for a lone surrogate
    assert text_literal("\udfff") is None
    assert array_literal([True], "BIGINT") is None  # a bool is no integer here
    assert array_literal([1], "VARCHAR") is None
    assert array_literal(["1"], "BIGINT") is None
    assert array_literal([math.inf], "FLOAT") is None
    assert array_literal([math.nan], "FLOAT") is None
    assert array_literal([10**400], "FLOAT") is None  # beyond a float
    assert array_literal([1], "NUMERIC") is None  # a cast it does not know
    assert array_literal([None, 2], "BIGINT") == "E'{NULL,2}'"
