"""Tool output truncation (KERNEL 7.6).

Output handed back to the model is capped by lines and bytes. When a cap bites, the full text is
saved under `<data_dir>/tool-output/` and the model gets a preview plus a note saying where the
rest is, so it can grep or read that file in slices instead of losing it.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentforge.model.ids import ascending

Direction = Literal["head", "tail"]

OUTPUT_DIR_NAME = "tool-output"


@dataclass(frozen=True, slots=True)
class TruncationLimits:
    max_lines: int = 2000
    max_bytes: int = 50 * 1024


@dataclass(frozen=True, slots=True)
class Cut:
    """What survives a cut: the kept text and how much was dropped, in `unit`s."""

    kept: str
    removed: int
    unit: Literal["lines", "bytes"]


def output_dir(data_dir: Path) -> Path:
    return data_dir / OUTPUT_DIR_NAME


def new_output_path(data_dir: Path) -> Path:
    """A fresh file name for a full output; ascending ids keep the directory in creation order."""
    return output_dir(data_dir) / ascending("tool")


def cut_text(text: str, limits: TruncationLimits, direction: Direction = "head") -> Cut | None:
    """Keep whole lines from the head (or tail) within both limits; None when nothing must go."""
    lines = text.split("\n")
    total_bytes = len(text.encode("utf-8"))
    if len(lines) <= limits.max_lines and total_bytes <= limits.max_bytes:
        return None

    ordered = lines if direction == "head" else list(reversed(lines))
    kept: list[str] = []
    kept_bytes = 0
    hit_bytes = False
    for line in ordered:
        if len(kept) >= limits.max_lines:
            break
        size = len(line.encode("utf-8")) + (1 if kept else 0)
        if kept_bytes + size > limits.max_bytes:
            hit_bytes = True
            break
        kept.append(line)
        kept_bytes += size

    if not kept:
        # A single line longer than the byte cap (minified JSON, a long log line): keep part of it
        # rather than hand the model an empty preview.
        return _cut_inside_line(ordered[0], total_bytes, limits.max_bytes, direction)
    if direction == "tail":
        kept.reverse()
    if hit_bytes:
        return Cut("\n".join(kept), total_bytes - kept_bytes, "bytes")
    return Cut("\n".join(kept), len(lines) - len(kept), "lines")


def _cut_inside_line(line: str, total_bytes: int, max_bytes: int, direction: Direction) -> Cut:
    encoded = line.encode("utf-8")
    piece = encoded[:max_bytes] if direction == "head" else encoded[-max_bytes:]
    kept = piece.decode("utf-8", errors="ignore")
    return Cut(kept, total_bytes - len(kept.encode("utf-8")), "bytes")


def truncation_hint(path: Path) -> str:
    return (
        "The tool call succeeded but the output was truncated. "
        f"Full output saved to: {path}\n"
        "Use grep to search the full content or read with offset/limit to view specific sections "
        "instead of reading the whole file."
    )


async def save_full_output(text: str, data_dir: Path) -> Path:
    path = new_output_path(data_dir)
    await asyncio.to_thread(_write_text, path, text)
    return path


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def truncate_output(
    text: str,
    *,
    limits: TruncationLimits,
    data_dir: Path,
    direction: Direction = "head",
) -> tuple[str, str | None]:
    """The text to hand the model, and the path of the saved full output when it was cut."""
    cut = cut_text(text, limits, direction)
    if cut is None:
        return text, None
    path = await save_full_output(text, data_dir)
    marker = f"...{cut.removed} {cut.unit} truncated..."
    hint = truncation_hint(path)
    if direction == "head":
        return f"{cut.kept}\n\n{marker}\n\n{hint}", str(path)
    return f"{marker}\n\n{hint}\n\n{cut.kept}", str(path)


async def cleanup_old_outputs(data_dir: Path, max_age_days: float = 7) -> int:
    """Delete saved outputs older than `max_age_days`; returns how many were removed."""
    cutoff = time.time() - max_age_days * 86400
    return await asyncio.to_thread(_remove_older_than, output_dir(data_dir), cutoff)


def _remove_older_than(directory: Path, cutoff: float) -> int:
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
        except FileNotFoundError:
            # Another cleanup (another replica, another loop) got there first.
            continue
    return removed
