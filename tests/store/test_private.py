"""Private files: created 0600 (directories 0700) whatever the umask, existing ones left alone."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentforge.store.private import create_private_file, ensure_private_file, make_private_dir


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask: whatever is private is so by our doing."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_new_directories_and_files_are_private(tmp_path: Path) -> None:
    make_private_dir(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == 0o700
    assert mode(tmp_path / "a" / "b") == 0o700
    ensure_private_file(tmp_path / "data" / "agentforge.db")
    assert mode(tmp_path / "data") == 0o700
    assert mode(tmp_path / "data" / "agentforge.db") == 0o600
    create_private_file(tmp_path / "key.pem", b"secret")
    assert mode(tmp_path / "key.pem") == 0o600
    with pytest.raises(FileExistsError):
        create_private_file(tmp_path / "key.pem", b"other")
    assert (tmp_path / "key.pem").read_bytes() == b"secret"


@pytest.mark.usefixtures("open_umask")
def test_existing_ones_keep_their_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    make_private_dir(shared)
    assert mode(shared) == 0o755
    database = shared / "agentforge.db"
    database.write_text("")
    database.chmod(0o640)
    ensure_private_file(database)
    assert mode(database) == 0o640
