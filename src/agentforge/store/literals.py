"""Postgres array literals of row values, for statements sent as SQL text (the writer's held
message, direct.py): a statement in a simple-protocol message takes no parameters.

`array_literal(values, cast)` is an escape-string constant (`E'…'`) holding an array's text form:
each element double-quoted with its backslashes and double quotes escaped (array syntax), then the
whole text with its backslashes doubled and its single quotes doubled (escape-string syntax). That
reads the same whatever `standard_conforming_strings` and `backslash_quote` are set to. A value this
cannot write exactly (a NUL, which Postgres text cannot hold and which would end the message's text;
a float that is not finite; a type the cast does not take) gives None: the caller sends the
statement with parameters instead.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final, Literal

_Kind = Literal["text", "int", "float", "bool"]
_UNWRITABLE: Final = re.compile("[\x00\ud800-\udfff]")
# The casts SQLAlchemy compiles the writer's columns to (asyncpg dialect), by what they take.
_KINDS: Final[dict[str, _Kind]] = {
    "VARCHAR": "text",
    "TEXT": "text",
    "BIGINT": "int",
    "INTEGER": "int",
    "SMALLINT": "int",
    "FLOAT": "float",
    "REAL": "float",
    "BOOLEAN": "bool",
}


def array_literal(values: list[Any], cast: str) -> str | None:
    """`values` as a `cast[]` constant (without the cast), or None when one cannot be written so."""
    kind = _KINDS.get(cast)
    if kind is None:
        return None
    elements: list[str] = []
    for value in values:
        element = "NULL" if value is None else _element(value, kind)
        if element is None:
            return None
        elements.append(element)
    text = "{" + ",".join(elements) + "}"
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def text_literal(value: str) -> str | None:
    """`value` as a text constant, or None when it holds a NUL or a lone surrogate."""
    if type(value) is not str or not _writable(value):
        return None
    return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _element(value: Any, kind: _Kind) -> str | None:
    # Exact types only: a bool is an int in Python, never in the column it came for.
    if kind == "text":
        if type(value) is not str or not _writable(value):
            return None
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if kind == "int":
        return str(value) if type(value) is int else None
    if kind == "float":
        try:
            written = float(value) if type(value) in (int, float) else math.nan
        except OverflowError:  # an int beyond a float's range
            return None
        return repr(written) if math.isfinite(written) else None
    return ("true" if value else "false") if type(value) is bool else None


def _writable(text: str) -> bool:
    if text.isascii():
        return "\x00" not in text
    return _UNWRITABLE.search(text) is None
