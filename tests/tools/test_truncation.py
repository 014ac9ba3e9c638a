from __future__ import annotations

import os
import time
from pathlib import Path

from agentforge.tools.truncation import (
    TruncationLimits,
    cleanup_old_outputs,
    cut_text,
    output_dir,
    truncate_output,
)
from tests.tools.harness import text_of


async def test_text_within_limits_is_returned_unchanged(tmp_path: Path) -> None:
    text = "\n".join(f"line {i}" for i in range(10))
    out, path = await truncate_output(text, limits=TruncationLimits(), data_dir=tmp_path)
    assert out == text
    assert path is None
    assert not output_dir(tmp_path).exists()


async def test_head_keeps_first_lines_and_saves_full_text(tmp_path: Path) -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    out, path = await truncate_output(
        text, limits=TruncationLimits(max_lines=10, max_bytes=10_000), data_dir=tmp_path
    )
    assert path is not None
    saved = Path(path)
    assert saved.parent == tmp_path / "tool-output"
    assert saved.name.startswith("tool_")
    assert text_of(saved) == text
    preview, _, rest = out.partition("\n\n...90 lines truncated...\n\n")
    assert preview == "\n".join(f"line {i}" for i in range(10))
    assert f"Full output saved to: {path}" in rest
    assert "grep" in rest and "offset/limit" in rest


async def test_tail_puts_marker_and_hint_first(tmp_path: Path) -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    out, path = await truncate_output(
        text, limits=TruncationLimits(max_lines=5, max_bytes=10_000), data_dir=tmp_path, direction="tail"
    )
    assert path is not None
    assert out.startswith("...95 lines truncated...\n\n")
    assert out.endswith("\n\n" + "\n".join(f"line {i}" for i in range(95, 100)))
    assert f"Full output saved to: {path}" in out


async def test_byte_limit_counts_bytes_and_keeps_whole_lines(tmp_path: Path) -> None:
    line = "é" * 10  # 20 bytes in UTF-8
    text = "\n".join([line] * 10)  # 10 lines, 209 bytes
    out, path = await truncate_output(
        text, limits=TruncationLimits(max_lines=100, max_bytes=50), data_dir=tmp_path
    )
    assert path is not None
    # Two lines (41 bytes) fit; a third would need 62.
    kept = 2 * 20 + 1
    assert out.startswith(f"{line}\n{line}\n\n...{len(text.encode()) - kept} bytes truncated...")


async def test_single_huge_line_keeps_a_prefix_instead_of_nothing(tmp_path: Path) -> None:
    text = "x" * 1000
    out, path = await truncate_output(
        text, limits=TruncationLimits(max_lines=100, max_bytes=100), data_dir=tmp_path
    )
    assert path is not None
    assert out.startswith("x" * 100 + "\n\n...900 bytes truncated...")


def test_cut_never_splits_a_multibyte_character() -> None:
    cut = cut_text("€" * 100, TruncationLimits(max_lines=10, max_bytes=10))
    assert cut is not None
    assert cut.kept == "€" * 3  # 9 bytes; a fourth would need 12
    assert cut.unit == "bytes"


def test_cut_returns_none_at_exact_limits() -> None:
    text = "\n".join(["ab"] * 3)  # 3 lines, 8 bytes
    assert cut_text(text, TruncationLimits(max_lines=3, max_bytes=8)) is None
    assert cut_text(text, TruncationLimits(max_lines=2, max_bytes=8)) is not None
    assert cut_text(text, TruncationLimits(max_lines=3, max_bytes=7)) is not None


async def test_each_truncation_gets_its_own_ascending_file(tmp_path: Path) -> None:
    limits = TruncationLimits(max_lines=1, max_bytes=1000)
    _, first = await truncate_output("a\nb", limits=limits, data_dir=tmp_path)
    _, second = await truncate_output("c\nd", limits=limits, data_dir=tmp_path)
    assert first is not None and second is not None
    assert first != second
    assert Path(first).name < Path(second).name


async def test_cleanup_removes_only_old_outputs(tmp_path: Path) -> None:
    directory = output_dir(tmp_path)
    directory.mkdir(parents=True)
    old = directory / "tool_old"
    new = directory / "tool_new"
    old.write_text("old")
    new.write_text("new")
    eight_days_ago = time.time() - 8 * 86400
    os.utime(old, (eight_days_ago, eight_days_ago))

    removed = await cleanup_old_outputs(tmp_path)

    assert removed == 1
    assert not old.exists()
    assert new.exists()


async def test_cleanup_without_output_dir_is_a_no_op(tmp_path: Path) -> None:
    assert await cleanup_old_outputs(tmp_path / "missing") == 0
