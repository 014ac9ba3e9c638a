"""The apply_patch format (KERNEL 7.7): parsing a patch, and applying an update to a file's text.

    *** Begin Patch
    *** Add File: path            lines prefixed "+"
    *** Delete File: path
    *** Update File: path
    *** Move to: new/path         optional
    @@ optional context line      then " " / "-" / "+" lines; "*** End of File" anchors at the end
    *** End Patch

Everything here is pure text work (no filesystem), so the tool can verify every hunk before it
touches any file. Matching is tolerant the way models need it: trailing whitespace, then surrounding
whitespace, then typographic punctuation may differ between the patch and the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File:"
DELETE = "*** Delete File:"
UPDATE = "*** Update File:"
MOVE = "*** Move to:"
END_OF_FILE = "*** End of File"
CHUNK = "@@"
BOM = "\ufeff"

# "@@ -12,3 +12,4 @@" as in unified diffs: a position, not a line to look for.
_UNIFIED_RANGE = re.compile(r"^-\d+(,\d+)? \+\d+(,\d+)? @@")
_HEREDOC_START = re.compile(r"^(?:apply_patch\s+)?<<-?\s*['\"]?(\w+)['\"]?\s*$")


class PatchError(ValueError):
    """The patch is malformed or does not fit the files; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    contents: str


@dataclass(frozen=True, slots=True)
class DeleteFile:
    path: str


@dataclass(frozen=True, slots=True)
class UpdateChunk:
    """One `@@` section: the context lines to find first, then the old lines and what replaces them."""

    contexts: tuple[str, ...]
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]
    end_of_file: bool = False
    # For each new line that is a context (" ") line, its index in old_lines: applying keeps the
    # file's own version of that line (the patch may differ from it in whitespace).
    kept_from_old: tuple[int | None, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class UpdateFile:
    path: str
    chunks: tuple[UpdateChunk, ...]
    move_to: str | None = None


Hunk = AddFile | DeleteFile | UpdateFile


def parse_patch(text: str) -> list[Hunk]:
    """The hunks of a patch, in order. Raises PatchError naming the offending line."""
    lines = _envelope(text)
    hunks = _Parser(lines).hunks()
    if not hunks:
        raise PatchError("the patch contains no file operations (Add File, Delete File, Update File)")
    return hunks


def _envelope(text: str) -> list[str]:
    """The lines between "*** Begin Patch" and "*** End Patch" (a shell heredoc around it is dropped)."""
    if not text.strip():
        raise PatchError("the patch is empty")
    lines = text.replace("\r\n", "\n").strip().split("\n")
    heredoc = _HEREDOC_START.match(lines[0].strip())
    if heredoc and len(lines) >= 2 and lines[-1].strip() == heredoc.group(1):
        lines = lines[1:-1] or [""]
    if lines[0].strip() != BEGIN:
        raise PatchError(f"the first line of the patch must be '{BEGIN}'")
    if lines[-1].strip() != END:
        raise PatchError(f"the last line of the patch must be '{END}'")
    return lines[1:-1]


@dataclass(slots=True)
class _ChunkBuilder:
    contexts: list[str] = field(default_factory=list)
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    kept_from_old: list[int | None] = field(default_factory=list)
    # Empty lines without a " " prefix: context if more diff lines follow, dropped at the chunk's end
    # (models leave blank lines between hunks).
    blank_run: int = 0

    def has_lines(self) -> bool:
        return bool(self.old or self.new)

    def add(self, kind: str, body: str) -> None:
        blanks, self.blank_run = self.blank_run, 0
        for _ in range(blanks):
            self._line(" ", "")
        self._line(kind, body)

    def _line(self, kind: str, body: str) -> None:
        if kind == " ":
            self.kept_from_old.append(len(self.old))
        elif kind == "+":
            self.kept_from_old.append(None)
        if kind in " -":
            self.old.append(body)
        if kind in " +":
            self.new.append(body)

    def build(self, end_of_file: bool = False) -> UpdateChunk:
        return UpdateChunk(
            tuple(self.contexts), tuple(self.old), tuple(self.new), end_of_file, tuple(self.kept_from_old)
        )


class _Parser:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.index = 0

    def _line_number(self) -> int:
        return self.index + 2  # 1-based, after the "*** Begin Patch" line

    def hunks(self) -> list[Hunk]:
        hunks: list[Hunk] = []
        while self.index < len(self.lines):
            header = self.lines[self.index].strip()
            if not header:
                self.index += 1
            elif header.startswith(ADD):
                hunks.append(self._add(_header_path(header, ADD)))
            elif header.startswith(DELETE):
                hunks.append(DeleteFile(_header_path(header, DELETE)))
                self.index += 1
            elif header.startswith(UPDATE):
                hunks.append(self._update(_header_path(header, UPDATE)))
            else:
                raise PatchError(
                    f"line {self._line_number()}: '{header}' is not a valid hunk header. Valid hunk "
                    f"headers: '{ADD} <path>', '{DELETE} <path>', '{UPDATE} <path>'"
                )
        return hunks

    def _add(self, path: str) -> AddFile:
        self.index += 1
        body: list[str] = []
        while self.index < len(self.lines) and self.lines[self.index].startswith("+"):
            body.append(self.lines[self.index][1:])
            self.index += 1
        return AddFile(path, "".join(line + "\n" for line in body))

    def _update(self, path: str) -> UpdateFile:
        self.index += 1
        move_to = None
        if self.index < len(self.lines) and self.lines[self.index].strip().startswith(MOVE):
            move_to = _header_path(self.lines[self.index].strip(), MOVE)
            self.index += 1
        chunks = self._chunks(path)
        if not chunks and move_to is None:
            raise PatchError(f"the update of {path} has no changes")
        return UpdateFile(path, tuple(chunks), move_to)

    def _chunks(self, path: str) -> list[UpdateChunk]:
        chunks: list[UpdateChunk] = []
        current: _ChunkBuilder | None = None
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if line.strip() == END_OF_FILE:
                if current is None or not current.has_lines():
                    raise PatchError(f"line {self._line_number()}: '{END_OF_FILE}' ends an empty chunk")
                chunks.append(current.build(end_of_file=True))
                current = None
            elif line.startswith("***"):
                break  # the next hunk
            elif line.startswith(CHUNK):
                current = self._chunk_header(line, current, chunks, path)
            elif line == "":
                current = current or _ChunkBuilder()
                current.blank_run += 1
            elif line[0] in " -+":
                current = current or _ChunkBuilder()
                current.add(line[0], line[1:])
            else:
                raise PatchError(
                    f"line {self._line_number()}: unexpected line in the update of {path}: '{line}'. "
                    "Every line of a chunk starts with ' ' (context), '-' (removed) or '+' (added)"
                )
            self.index += 1
        if current is not None:
            chunks.append(self._finished(current, path))
        return chunks

    def _chunk_header(
        self, line: str, current: _ChunkBuilder | None, chunks: list[UpdateChunk], path: str
    ) -> _ChunkBuilder:
        context = line[len(CHUNK) :].removeprefix(" ")
        if _UNIFIED_RANGE.match(context.strip()) or not context.strip():
            context = ""
        if current is not None and not current.has_lines():
            # "@@ class A" then "@@ def f": narrow down step by step before the changed lines.
            if context:
                current.contexts.append(context)
            return current
        if current is not None:
            chunks.append(self._finished(current, path))
        return _ChunkBuilder(contexts=[context] if context else [])

    def _finished(self, chunk: _ChunkBuilder, path: str) -> UpdateChunk:
        if not chunk.has_lines():
            raise PatchError(f"line {self._line_number()}: a chunk in the update of {path} has no lines")
        return chunk.build()


def _header_path(header: str, prefix: str) -> str:
    path = header[len(prefix) :].strip()
    if not path:
        raise PatchError(f"'{header}' names no file")
    return path


# --- applying an update to text ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextFile:
    """A file's text with "\\n" line endings and no BOM, plus what it takes to write it back as it was."""

    text: str
    bom: bool = False
    crlf: bool = False

    @classmethod
    def decode(cls, raw: bytes, name: str) -> TextFile:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise PatchError(f"{name} is not UTF-8 text ({error.reason})") from None
        bom = text.startswith(BOM)
        text = text.removeprefix(BOM)
        return cls(text.replace("\r\n", "\n"), bom=bom, crlf="\r\n" in text)

    def encode(self, text: str) -> str:
        """`text` ("\\n" endings) in this file's style: its line endings, and its BOM if it had one."""
        styled = text.replace("\n", "\r\n") if self.crlf else text
        return BOM + styled if self.bom else styled


_PUNCTUATION = str.maketrans(
    {
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
        "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"',
        "\u00a0": " ", "\u2002": " ", "\u2003": " ", "\u2009": " ", "\u202f": " ",
    }
)  # fmt: skip


def _same(line: str) -> str:
    return line


def _rstripped(line: str) -> str:
    return line.rstrip()


def _stripped(line: str) -> str:
    return line.strip()


def _plain_punctuation(line: str) -> str:
    return line.strip().translate(_PUNCTUATION)


_MATCHERS: tuple[Callable[[str], str], ...] = (_same, _rstripped, _stripped, _plain_punctuation)


def seek_sequence(
    lines: Sequence[str], pattern: Sequence[str], start: int, *, at_end: bool = False
) -> int | None:
    """Where `pattern` occurs in `lines` at or after `start`, trying ever looser comparisons.

    `at_end` (an "*** End of File" chunk) prefers a match at the very end of the file.
    """
    if not pattern:
        return start
    last = len(lines) - len(pattern)
    if last < start:
        return None
    for normalise in _MATCHERS:
        wanted = [normalise(line) for line in pattern]
        candidates = range(start, last + 1)
        if at_end:
            candidates = range(last, start - 1, -1)
        for index in candidates:
            if all(normalise(lines[index + offset]) == wanted[offset] for offset in range(len(pattern))):
                return index
    return None


@dataclass(frozen=True, slots=True)
class _Replacement:
    start: int
    length: int
    lines: tuple[str, ...]


def apply_update(text: str, chunks: Sequence[UpdateChunk], name: str) -> str:
    """The new text of a file after the chunks of an update. Raises PatchError when a chunk's context
    or old lines are not in the file (in order, each after the previous one)."""
    lines = text.split("\n")
    ends_with_newline = text.endswith("\n")
    if ends_with_newline:
        lines.pop()
    replacements = _locate(lines, chunks, name)
    for replacement in sorted(replacements, key=lambda r: r.start, reverse=True):
        lines[replacement.start : replacement.start + replacement.length] = replacement.lines
    updated = "\n".join(lines)
    if lines and (ends_with_newline or not text):
        updated += "\n"
    return updated


def _locate(lines: list[str], chunks: Sequence[UpdateChunk], name: str) -> list[_Replacement]:
    replacements: list[_Replacement] = []
    position = 0
    for chunk in chunks:
        for context in chunk.contexts:
            found = seek_sequence(lines, [context], position)
            if found is None:
                raise PatchError(f"failed to find context '{context}' in {name}")
            position = found + 1
        if not chunk.old_lines:
            # Pure addition: after the context when there is one, else at the end of the file.
            at = position if chunk.contexts else len(lines)
            replacements.append(_Replacement(at, 0, chunk.new_lines))
            continue
        old, new = chunk.old_lines, chunk.new_lines
        found = seek_sequence(lines, old, position, at_end=chunk.end_of_file)
        if found is None and old[-1] == "":
            # A trailing empty context line often stands for the file's final newline.
            old = old[:-1]
            new = new[:-1] if new and new[-1] == "" else new
            found = seek_sequence(lines, old, position, at_end=chunk.end_of_file)
        if found is None:
            expected = "\n".join(chunk.old_lines)
            raise PatchError(f"failed to find the expected lines in {name}:\n{expected}")
        replacements.append(_Replacement(found, len(old), _with_file_context(lines, found, new, chunk)))
        position = found + len(old)
    return replacements


def _with_file_context(
    lines: list[str], found: int, new: tuple[str, ...], chunk: UpdateChunk
) -> tuple[str, ...]:
    """The replacement lines, with each context line taken from the file rather than the patch."""
    if not chunk.kept_from_old:
        return new
    return tuple(
        lines[found + source] if source is not None and found + source < len(lines) else text
        for text, source in zip(new, chunk.kept_from_old, strict=False)
    )
