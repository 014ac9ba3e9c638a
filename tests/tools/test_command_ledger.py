"""The command ledger: start-up kills the process groups of the commands a dead run left listed,
recognised by the token in their environment, and nothing else: not the commands of a live server
sharing the data directory."""

from __future__ import annotations

import asyncio
import os
import sys
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


async def dead_instance_entry(directory: Path, instance: str) -> str:
    """An entry listed by an instance whose process has since exited (releasing its instance lock)."""
    script = (
        "import asyncio, sys; from pathlib import Path;"
        "from agentforge.tools.command_ledger import CommandLedger;"
        "print(asyncio.run(CommandLedger(Path(sys.argv[1]), sys.argv[2]).open_entry()))"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(directory), instance, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    return out.decode().strip()


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


async def group_emptied(pgid: int) -> bool:
    """Whether the group's last member exits within 10 s: a killed process lingers a moment."""
    for _ in range(500):
        if not group_members(pgid):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_leftovers_of_listed_commands_are_killed_and_others_are_not(tmp_path: Path) -> None:
    ledger = CommandLedger(tmp_path / "commands")
    listed = await dead_instance_entry(tmp_path / "commands", "deadbeef")
    left = await start_group({TOKEN_VARIABLE: listed})
    unlisted = await start_group({TOKEN_VARIABLE: "not-in-the-ledger"})
    try:
        killed = await asyncio.to_thread(ledger.kill_leftovers)

        assert killed == 1
        assert await exited(left)
        assert await group_emptied(left.pid)  # the background child too
        assert unlisted.returncode is None
        assert list((tmp_path / "commands").iterdir()) == []  # the dead instance's lock file too
    finally:
        unlisted.kill()
        await unlisted.wait()


async def test_recovery_leaves_a_live_servers_commands_alone(tmp_path: Path) -> None:
    """Two servers on one data dir: the second's start-up recovery must not kill the first's running
    command, and still kills what a dead instance left."""
    directory = tmp_path / "commands"
    live = CommandLedger(directory, "11111111")  # the first server: live, holds its instance lock
    running = await start_group({TOKEN_VARIABLE: await live.open_entry()})
    left = await start_group({TOKEN_VARIABLE: await dead_instance_entry(directory, "22222222")})
    try:
        second = CommandLedger(directory, "33333333")
        assert await asyncio.to_thread(second.kill_leftovers) == 1

        assert await exited(left)
        assert running.returncode is None
        assert group_members(running.pid) != []
        assert sorted(e.name.split("-")[0] for e in directory.iterdir()) == ["11111111", "11111111.lock"]
    finally:
        running.kill()
        await running.wait()


async def test_an_ended_command_leaves_no_entry(tmp_path: Path) -> None:
    ledger = CommandLedger(tmp_path / "commands")
    token = await ledger.open_entry()
    assert sorted(entry.name for entry in (tmp_path / "commands").iterdir()) == sorted(
        [token, f"{ledger.instance}.lock"]
    )
    await ledger.close_entry(token)
    assert [entry.name for entry in (tmp_path / "commands").iterdir()] == [f"{ledger.instance}.lock"]
    assert await asyncio.to_thread(ledger.kill_leftovers) == 0
