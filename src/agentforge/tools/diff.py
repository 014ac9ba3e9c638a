"""Unified diffs for edit/write metadata (what a client shows and a permission prompt displays)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

_NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True, slots=True)
class FileDiff:
    file: str
    patch: str
    additions: int
    deletions: int

    def wire(self) -> dict[str, str | int]:
        return {
            "file": self.file,
            "patch": self.patch,
            "additions": self.additions,
            "deletions": self.deletions,
        }


def unified_diff(filepath: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=filepath,
        tofile=filepath,
    )
    # difflib leaves a last line without "\n" glued to the next; mark it the way `diff -u` does.
    return "".join(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE for line in lines)


def file_diff(filepath: str, before: str, after: str) -> FileDiff:
    patch = unified_diff(filepath, before, after)
    additions = deletions = 0
    in_hunks = False  # the "---"/"+++" file headers come before the first "@@"
    for line in patch.splitlines():
        if line.startswith("@@"):
            in_hunks = True
        elif in_hunks and line.startswith("+"):
            additions += 1
        elif in_hunks and line.startswith("-"):
            deletions += 1
    return FileDiff(file=filepath, patch=patch, additions=additions, deletions=deletions)
