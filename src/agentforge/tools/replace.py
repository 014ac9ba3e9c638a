"""The edit tool's matcher cascade (KERNEL 7.7).

Models often quote the text to replace imperfectly: wrong indentation, trimmed lines, escaped
newlines, a slightly different middle line. Each matcher proposes strings that *literally occur*
in the file and plausibly are what `old` meant; the first proposal that occurs exactly once (or any,
with replace_all) is replaced. Matchers run from strictest to loosest, so an exact match always wins.
All text here uses "\\n" line endings; the caller normalises CRLF files around this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from agentforge.tools.base import ToolError

Matcher = Callable[[str, str], Iterator[str]]

SINGLE_CANDIDATE_SIMILARITY = 0.0
MULTIPLE_CANDIDATES_SIMILARITY = 0.3
CONTEXT_MATCH_RATIO = 0.5

NOT_FOUND = (
    "Could not find oldString in the file. It must match exactly, including whitespace, "
    "indentation, and line endings."
)
MULTIPLE = "Found multiple matches for oldString. Provide more surrounding context to make the match unique."
IDENTICAL = "No changes to apply: oldString and newString are identical."


def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            cost = 0 if char_a == char_b else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


def _search_lines(find: str) -> list[str]:
    lines = find.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a trailing newline in oldString does not ask for an empty last line
    return lines


def _line_span(lines: list[str], start: int, count: int) -> str:
    return "\n".join(lines[start : start + count])


def exact(content: str, find: str) -> Iterator[str]:
    yield find


def line_trimmed(content: str, find: str) -> Iterator[str]:
    """Same lines, ignoring leading/trailing whitespace on each."""
    lines = content.split("\n")
    wanted = [line.strip() for line in _search_lines(find)]
    for start in range(len(lines) - len(wanted) + 1):
        if all(lines[start + k].strip() == wanted[k] for k in range(len(wanted))):
            yield _line_span(lines, start, len(wanted))


def _middle_similarity(lines: list[str], start: int, end: int, wanted: list[str]) -> float:
    """Mean Levenshtein similarity of the lines between the anchors (1.0 when there are none)."""
    block_size = end - start + 1
    to_check = min(len(wanted) - 2, block_size - 2)
    if to_check <= 0:
        return 1.0
    total = 0.0
    for k in range(1, to_check + 1):
        have, want = lines[start + k].strip(), wanted[k].strip()
        longest = max(len(have), len(want))
        total += 1.0 if longest == 0 else 1 - levenshtein(have, want) / longest
    return total / to_check


def _anchored_blocks(lines: list[str], first: str, last: str) -> list[tuple[int, int]]:
    """(start, end) line pairs where `first` opens a block that `last` closes (nearest close)."""
    blocks: list[tuple[int, int]] = []
    for start, line in enumerate(lines):
        if line.strip() != first:
            continue
        for end in range(start + 2, len(lines)):
            if lines[end].strip() == last:
                blocks.append((start, end))
                break
    return blocks


def block_anchor(content: str, find: str) -> Iterator[str]:
    """First and last lines match (trimmed); the middle only needs to be similar."""
    wanted = _search_lines(find)
    if len(wanted) < 3:
        return
    lines = content.split("\n")
    blocks = _anchored_blocks(lines, wanted[0].strip(), wanted[-1].strip())
    if not blocks:
        return
    threshold = SINGLE_CANDIDATE_SIMILARITY if len(blocks) == 1 else MULTIPLE_CANDIDATES_SIMILARITY
    scored = [(_middle_similarity(lines, start, end, wanted), start, end) for start, end in blocks]
    best_score, best_start, best_end = max(scored, key=lambda item: item[0])
    if best_score >= threshold:
        yield _line_span(lines, best_start, best_end - best_start + 1)


def _collapse_whitespace(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def whitespace_normalized(content: str, find: str) -> Iterator[str]:
    """Equal once every run of whitespace counts as one space."""
    wanted = _collapse_whitespace(find)
    if not wanted:
        return
    lines = content.split("\n")
    words = find.split()
    in_line = re.compile(r"\s+".join(re.escape(word) for word in words))
    for line in lines:
        collapsed = _collapse_whitespace(line)
        if collapsed == wanted:
            yield line
        elif wanted in collapsed:
            found = in_line.search(line)
            if found:
                yield found.group(0)
    find_lines = find.split("\n")
    if len(find_lines) > 1:
        for start in range(len(lines) - len(find_lines) + 1):
            block = _line_span(lines, start, len(find_lines))
            if _collapse_whitespace(block) == wanted:
                yield block


def _dedent(text: str) -> str:
    lines = text.split("\n")
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    if not indents:
        return text
    cut = min(indents)
    return "\n".join(line[cut:] if line.strip() else line for line in lines)


def indentation_flexible(content: str, find: str) -> Iterator[str]:
    """Same block once the common indentation is removed from both sides."""
    wanted = _dedent(find)
    lines = content.split("\n")
    size = len(find.split("\n"))
    for start in range(len(lines) - size + 1):
        block = _line_span(lines, start, size)
        if _dedent(block) == wanted:
            yield block


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "`": "`", "\\": "\\", "\n": "\n", "$": "$"}
_ESCAPE_PATTERN = re.compile(r"\\(n|t|r|'|\"|`|\\|\n|\$)")


def _unescape(text: str) -> str:
    return _ESCAPE_PATTERN.sub(lambda found: _ESCAPES[found.group(1)], text)


def escape_normalized(content: str, find: str) -> Iterator[str]:
    """oldString written with literal escapes (`\\n`, `\\t`, `\\"`) the file does not have."""
    wanted = _unescape(find)
    if wanted in content:
        yield wanted
    lines = content.split("\n")
    size = len(wanted.split("\n"))
    for start in range(len(lines) - size + 1):
        block = _line_span(lines, start, size)
        if _unescape(block) == wanted:
            yield block


def trimmed_boundary(content: str, find: str) -> Iterator[str]:
    """oldString with stray leading/trailing whitespace."""
    trimmed = find.strip()
    if trimmed == find or not trimmed:
        return
    if trimmed in content:
        yield trimmed
    lines = content.split("\n")
    size = len(find.split("\n"))
    for start in range(len(lines) - size + 1):
        block = _line_span(lines, start, size)
        if block.strip() == trimmed:
            yield block


def _middle_lines_agree(block: list[str], wanted: list[str]) -> bool:
    matching = non_empty = 0
    for have, want in zip(block[1:-1], wanted[1:-1], strict=True):
        if have.strip() or want.strip():
            non_empty += 1
            matching += have.strip() == want.strip()
    return non_empty == 0 or matching / non_empty >= CONTEXT_MATCH_RATIO


def context_aware(content: str, find: str) -> Iterator[str]:
    """Anchors match and at least half of the middle lines are equal (trimmed)."""
    wanted = _search_lines(find)
    if len(wanted) < 3:
        return
    lines = content.split("\n")
    for start, end in _anchored_blocks(lines, wanted[0].strip(), wanted[-1].strip()):
        block = lines[start : end + 1]
        if len(block) == len(wanted) and _middle_lines_agree(block, wanted):
            yield "\n".join(block)
            return


def multi_occurrence(content: str, find: str) -> Iterator[str]:
    """Every exact occurrence (lets replace_all act on them; a lone one is already exact)."""
    start = content.find(find)
    while start != -1:
        yield find
        start = content.find(find, start + len(find))


MATCHERS: tuple[Matcher, ...] = (
    exact,
    line_trimmed,
    block_anchor,
    whitespace_normalized,
    indentation_flexible,
    escape_normalized,
    trimmed_boundary,
    context_aware,
    multi_occurrence,
)


def replace(content: str, old: str, new: str, *, replace_all: bool = False) -> str:
    """Replace `old` in `content` with `new`, trying the matchers in order.

    Raises ToolError when nothing matches, or when every match is ambiguous without replace_all.
    """
    if old == new:
        raise ToolError(IDENTICAL)
    found_any = False
    for matcher in MATCHERS:
        for candidate in matcher(content, old):
            if not candidate:
                continue
            index = content.find(candidate)
            if index == -1:
                continue
            found_any = True
            if replace_all:
                return content.replace(candidate, new)
            if content.rfind(candidate) != index:
                continue
            return content[:index] + new + content[index + len(candidate) :]
    raise ToolError(MULTIPLE if found_any else NOT_FOUND)
