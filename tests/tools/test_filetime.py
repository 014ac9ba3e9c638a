from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentforge.tools import filetime
from agentforge.tools.base import ToolError
from tests.tools.harness import as_seen, assert_fresh


def test_never_read_file_must_be_read_first(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    with pytest.raises(ToolError, match=r"You must read file .* before overwriting it"):
        assert_fresh("ses_never", path)


def test_unchanged_file_is_fresh(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    filetime.note_read("ses_fresh", as_seen(path))
    assert_fresh("ses_fresh", path)
    assert filetime.last_read("ses_fresh", path) is not None


def test_modified_file_is_stale_even_within_the_same_second(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    stat = path.stat()
    filetime.note_read("ses_stale", as_seen(path))
    path.write_text("yy")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime, different size
    with pytest.raises(ToolError) as caught:
        assert_fresh("ses_stale", path)
    message = str(caught.value)
    assert message.startswith(f"File {path} has been modified since it was last read.")
    assert message.endswith("Please read the file again before modifying it.")


def test_reads_are_per_session(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    filetime.note_read("ses_one", as_seen(path))
    with pytest.raises(ToolError):
        assert_fresh("ses_two", path)


def test_forget_session_drops_its_reads(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    filetime.note_read("ses_forget", as_seen(path))
    filetime.forget_session("ses_forget")
    assert filetime.last_read("ses_forget", path) is None


def test_the_least_recently_reading_sessions_are_forgotten_past_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filetime, "MAX_READ_RECORDS", 3)
    for session in list(filetime._reads):  # other tests' records: this one counts from none
        filetime.forget_session(session)
    files = []
    for name in ("one", "two", "three", "four", "five"):
        (tmp_path / name).write_text(name)
        files.append(as_seen(tmp_path / name))
    filetime.note_read("ses_cap_a", files[0])
    filetime.note_read("ses_cap_b", files[1])
    filetime.note_read("ses_cap_a", files[2])  # a read last: b is the least recently reading
    filetime.note_read("ses_cap_a", files[3])  # four files: b's record goes
    assert filetime.last_read("ses_cap_b", files[1].key) is None
    kept = [filetime.last_read("ses_cap_a", seen.key) is not None for seen in files]
    assert kept == [True, False, True, True, False]
    filetime.note_read("ses_cap_a", files[0])  # read again: now its most recent
    filetime.note_read("ses_cap_a", files[4])  # alone past the cap: its least recently read goes
    assert filetime.last_read("ses_cap_a", files[2].key) is None
    kept = [filetime.last_read("ses_cap_a", seen.key) is not None for seen in files]
    assert kept == [True, False, False, True, True]
    filetime.forget_session("ses_cap_a")
    filetime.note_read("ses_cap_c", files[1])
    assert filetime.last_read("ses_cap_c", files[1].key) is not None  # the count went down with it


async def test_file_lock_is_shared_per_file(tmp_path: Path) -> None:
    a = filetime.file_lock(tmp_path / "a")
    assert filetime.file_lock(tmp_path / "a") is a
    assert filetime.file_lock(tmp_path / "b") is not a


def test_a_file_as_it_was_seen_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    filetime.assert_unchanged(path, path.resolve(), as_seen(path))
    filetime.assert_unchanged(
        tmp_path / "absent.txt", tmp_path.resolve() / "absent.txt", None
    )  # none then, none now


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (lambda path: path.write_text("changed"), "was modified"),
        (Path.unlink, "was deleted"),
    ],
    ids=["modified", "deleted"],
)
def test_a_file_changed_since_it_was_seen_is_refused(
    tmp_path: Path, change: Callable[[Path], object], what: str
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    seen = as_seen(path)
    change(path)
    with pytest.raises(ToolError, match=f"File {path} {what} while this change waited"):
        filetime.assert_unchanged(path, path.resolve(), seen)


def test_a_file_created_since_there_was_none_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("someone else's")
    with pytest.raises(ToolError, match=f"File {path} was created while this change waited"):
        filetime.assert_unchanged(path, path.resolve(), None)
