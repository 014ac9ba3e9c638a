"""The checkpoint file as the server reads it at start: only its end (store/audit_checkpoints.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentforge.store.audit_checkpoints import (
    Checkpoint,
    CheckpointError,
    Head,
    append_checkpoint,
    last_checkpoint,
    read_checkpoints,
)


def test_the_last_checkpoint_is_read_from_the_file_s_end_whatever_its_length(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.jsonl"
    assert last_checkpoint(path) is None
    small = Checkpoint(1, "ed25519:k", {"a": Head(1, "h")}, "sig")
    # Longer than the chunks the end is read in: many tenants' heads in one line.
    large = Checkpoint(2, "ed25519:k", {f"tenant-{n}": Head(n, "f" * 64) for n in range(2000)}, "sig")
    path.write_text(f"{small.line()}\n\n{large.line()}\n\n")
    assert last_checkpoint(path) == large
    path.write_text(f"{large.line()}\n{small.line()}")
    assert last_checkpoint(path) == small
    path.write_text("\n \n")
    assert last_checkpoint(path) is None


def test_a_last_line_that_is_no_checkpoint_is_named(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.jsonl"
    path.write_text(Checkpoint(1, "ed25519:k", {}, "sig").line() + "\n{not json\n")
    with pytest.raises(CheckpointError, match=r"checkpoints\.jsonl, last line: not a checkpoint"):
        last_checkpoint(path)


def test_a_line_torn_by_a_crash_stays_one_bad_line_and_the_next_checkpoint_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.jsonl"
    first = Checkpoint(1, "ed25519:k", {"a": Head(1, "h")}, "sig")
    append_checkpoint(path, first)
    torn = Checkpoint(2, "ed25519:k", {"a": Head(2, "h")}, "sig").line()
    with path.open("a") as file:
        file.write(torn[: len(torn) // 2])  # the process died mid-line
    with pytest.raises(CheckpointError, match="last line: not a checkpoint"):
        last_checkpoint(path)
    after = Checkpoint(3, "ed25519:k", {"a": Head(3, "h")}, "sig")
    append_checkpoint(path, after)
    assert last_checkpoint(path) == after
    lines = path.read_text().splitlines()
    assert lines[0] == first.line() and lines[1] == torn[: len(torn) // 2] and lines[2] == after.line()
    with pytest.raises(CheckpointError, match="line 2: not a checkpoint"):
        read_checkpoints(path)
