"""Collecting a shell command's output as it streams (KERNEL 7.7, bash).

Small outputs stay in memory. Once the output passes the byte limit, everything so far and
everything after goes to a file under the truncation directory, and only a rolling tail stays in
memory (twice the limit), enough for the final "last lines" view and the live preview.
`max_total_bytes` caps the file: past it, output is no longer saved (the tail in memory still
follows it), so a command printing without end cannot fill the disk before its timeout.
"""

from __future__ import annotations

import asyncio
import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from agentforge.tools.truncation import TruncationLimits, cut_text, new_output_path


@dataclass(frozen=True, slots=True)
class FinalOutput:
    text: str
    truncated: bool
    output_path: str | None


class ShellOutput:
    def __init__(
        self, data_dir: Path, limits: TruncationLimits, *, max_total_bytes: int | None = None
    ) -> None:
        self._data_dir = data_dir
        self._limits = limits
        self._max_total = max_total_bytes
        self._dropped = 0  # bytes past max_total_bytes, not saved
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""  # everything while not spilled; the rolling tail once spilled
        self._bytes = 0
        self._spill_path: Path | None = None
        self._spill: TextIO | None = None

    @property
    def spilled(self) -> bool:
        return self._spill_path is not None

    def tail(self, max_chars: int) -> str:
        return self._text[-max_chars:]

    async def add(self, chunk: bytes) -> None:
        text = self._decoder.decode(chunk)
        self._bytes += len(chunk)
        await self._append(text)

    async def _append(self, text: str) -> None:
        if not text:
            return
        if self._spill is None and self._bytes > self._limits.max_bytes:
            await self._start_spill()
            assert self._spill is not None
            await asyncio.to_thread(self._spill.write, self._text + text)
        elif self._spill is not None and not self._over_cap(text):
            await asyncio.to_thread(self._spill.write, text)
        self._text += text
        if self._spill is not None:
            self._text = self._text[-2 * self._limits.max_bytes :]

    def _over_cap(self, text: str) -> bool:
        """Whether `text` (just counted in `_bytes`) goes past `max_total_bytes`: then it is dropped."""
        if self._max_total is None or self._bytes <= self._max_total:
            return False
        self._dropped += len(text.encode("utf-8", errors="replace"))
        return True

    async def _start_spill(self) -> None:
        self._spill_path = new_output_path(self._data_dir)
        self._spill = await asyncio.to_thread(_open_for_writing, self._spill_path)

    async def finish(self) -> FinalOutput:
        """Flush, close the spill file, and give the text for the model (the tail when cut)."""
        await self._append(self._decoder.decode(b"", final=True))
        cut = cut_text(self._text, self._limits, direction="tail")
        if cut is None and not self.spilled:
            self.close()
            return FinalOutput(self._text, truncated=False, output_path=None)
        if not self.spilled:
            # Too many lines though few bytes: the full text still has to be kept somewhere.
            await self._start_spill()
            assert self._spill is not None
            await asyncio.to_thread(self._spill.write, self._text)
        self.close()
        kept = cut.kept if cut is not None else self._text
        saved = f"Full output saved to: {self._spill_path}"
        if self._dropped:
            saved = f"Output saved to {self._spill_path} up to {self._max_total} bytes; the rest was not kept"
        text = f"...output truncated...\n\n{saved}\n\n{kept}"
        return FinalOutput(text, truncated=True, output_path=str(self._spill_path))

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None


def _open_for_writing(path: Path) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8", newline="")
