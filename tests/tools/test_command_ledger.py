"""The command ledger: start-up kills the process groups of the commands a dead run left listed,
recognised by the token in their environment, and nothing else."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agentforge.clock import SYSTEM_CLOCK
from agentforge.tools.command_ledger import TOKEN_VARIABLE, CommandLedger


async def start_group(env: dict[str, str]) -> asyncio.subprocess.Process:
    # A leader with a background child: both in the leader's new session and process group.
    return await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", "sleep 60 & wait", env={**os.environ, **env}, start_new_session=True
    )


async def exited(process: asyncio.subprocess.Process) -> bool:
    deadline = SYSTEM_CLOCK.time() + 10
    while process.returncode is None and SYSTEM_CLOCK.time() < deadline:
        try:
            await asyncio.wait_for(process.wait(), 0.1)
        except TimeoutError:
            continue
    return process.returncode is not None


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of the group."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


async def test_leftovers_of_listed_commands_are_killed_and_others_are_not(tmp_path: Path) -> None:
    ledger = CommandLedger(tmp_path / "commands")
    listed = await ledger.open_entry()
    left = await start_group({TOKEN_VARIABLE: listed})
    unlisted = await start_group({TOKEN_VARIABLE: "not-in-the-ledger"})
    try:
        killed = await asyncio.to_thread(ledger.kill_leftovers)

        assert killed == 1
        assert await exited(left)
        assert group_members(left.pid) == []  # the background child too
        assert unlisted.returncode is None
        assert list((tmp_path / "commands").iterdir()) == []
    finally:
        unlisted.kill()
        await unlisted.wait()


async def test_an_ended_command_leaves_no_entry(tmp_path: Path) -> None:
    ledger = CommandLedger(tmp_path / "commands")
    token = await ledger.open_entry()
    assert [entry.name for entry in (tmp_path / "commands").iterdir()] == [token]
    await ledger.close_entry(token)
    assert list((tmp_path / "commands").iterdir()) == []
    assert await asyncio.to_thread(ledger.kill_leftovers) == 0
