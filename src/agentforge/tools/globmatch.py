"""Glob patterns as ripgrep's `--glob` understands them (gitignore style).

`*` and `?` stay inside one path segment, `**` crosses segments, `[...]` is a character class
(`[!...]` negated), `{a,b}` is an alternation. A pattern without a slash matches a file name at any
depth (`*.py`); one with a slash is anchored at the search root (`src/*.py`, `**/test_*.py`).
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    cleaned = pattern.strip()
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    anchored = "/" in cleaned.rstrip("/")
    cleaned = cleaned.lstrip("/")
    body = _translate(cleaned)
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(f"^{prefix}{body}$", re.DOTALL)


def glob_matches(pattern: str, relative_path: str) -> bool:
    """Does the slash-separated path (relative to the search root) match the pattern?"""
    return compile_glob(pattern).match(relative_path) is not None


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            i = _translate_globstar(pattern, i, out)
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            i = _translate_class(pattern, i, out)
            continue
        elif char == "{":
            i = _translate_alternation(pattern, i, out)
            continue
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _translate_globstar(pattern: str, i: int, out: list[str]) -> int:
    end = i + 2
    if end < len(pattern) and pattern[end] == "/":
        out.append("(?:.*/)?")  # `**/` matches zero or more whole directories
        return end + 1
    out.append(".*")
    return end


def _translate_class(pattern: str, i: int, out: list[str]) -> int:
    end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
    if end == -1:
        out.append(re.escape("["))
        return i + 1
    inner = pattern[i + 1 : end]
    if inner[:1] in ("!", "^"):
        inner = "^" + inner[1:]
    out.append("[" + inner.replace("\\", "\\\\") + "]")
    return end + 1


def _translate_alternation(pattern: str, i: int, out: list[str]) -> int:
    depth, end = 0, -1
    for j in range(i, len(pattern)):
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                end = j
                break
    if end == -1:
        out.append(re.escape("{"))
        return i + 1
    options = _split_top_level(pattern[i + 1 : end])
    out.append("(?:" + "|".join(_translate(option) for option in options) + ")")
    return end + 1


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth, start = 0, 0
    for j, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    parts.append(text[start:])
    return parts
