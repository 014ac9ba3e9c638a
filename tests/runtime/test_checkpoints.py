"""The server's checkpoint at start: signed unless the checkpoint file's last one already makes it (the
same heads, under an interval old), so a restart with nothing new to sign loads no signing library.
(tests/e2e/test_audit_checkpoints.py: the server takes them at start and then periodically.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentforge.config import Settings
from agentforge.runtime.checkpoints import checkpoint_file, checkpoint_key, take_start_checkpoint
from agentforge.store.audit_checkpoints import Checkpoint, read_checkpoints, verified
from tests.e2e.harness import fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI

HOUR = 3600.0


async def _serve(tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, *, sessions: int) -> Settings:
    """Start and stop a server that takes no checkpoint of its own, creating `sessions` sessions (an
    audit row each in the `default` chain)."""
    config = {**fake_provider_config(fake_openai), "audit": {"checkpoint_interval": 0}}
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        for _ in range(sessions):
            await live.create_session()
        return live.settings


async def _start(settings: Settings, now_ms: int) -> Checkpoint | None:
    return await asyncio.to_thread(take_start_checkpoint, settings, HOUR, now_ms)


async def _file(settings: Settings) -> list[Checkpoint]:
    path = checkpoint_file(settings)
    key = await asyncio.to_thread(checkpoint_key, settings, create=False)
    return verified(await asyncio.to_thread(read_checkpoints, path), key, path)


async def test_a_restart_signs_only_heads_no_recent_checkpoint_records(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    settings = await _serve(tmp_path, fake_openai, database_url, sessions=1)
    first = await _start(settings, now_ms=1_000_000)
    assert first is not None and first.heads["default"].seq >= 1

    # Restarted a minute later with no audit row since: the last checkpoint already says it all.
    assert await _start(settings, now_ms=1_060_000) is None
    assert await _file(settings) == [first]

    # An hour after it, the same heads are signed again: the doctor's bound on the latest one's age holds.
    later = await _start(settings, now_ms=1_000_000 + int(HOUR * 1000))
    assert later is not None and later.heads == first.heads

    # A row written since: signed at once.
    await _serve(tmp_path, fake_openai, database_url, sessions=1)
    moved = await _start(settings, now_ms=later.time + 1000)
    assert moved is not None and moved.heads["default"].seq > first.heads["default"].seq
    assert await _file(settings) == [first, later, moved]


async def test_a_last_line_that_is_no_checkpoint_or_from_the_future_is_signed_over(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    settings = await _serve(tmp_path, fake_openai, database_url, sessions=1)
    first = await _start(settings, now_ms=5_000_000)
    assert first is not None
    # A clock set back since: a checkpoint "from the future" proves nothing about now.
    assert await _start(settings, now_ms=4_000_000) is not None
    path = checkpoint_file(settings)
    await asyncio.to_thread(path.write_text, path.read_text() + "not a checkpoint\n")
    assert await _start(settings, now_ms=5_001_000) is not None
    assert len(path.read_text().splitlines()) == 4
