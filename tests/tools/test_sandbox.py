"""The OS sandbox, run for real (bwrap): what a command sees, writes, reaches and may use."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agentforge.tools.sandbox import (
    NO_SANDBOX,
    Limits,
    Sandbox,
    SandboxRefusedError,
    View,
    locate_default_signal_env,
    probe,
    refused,
)
from tests.sandboxing import BWRAP, PRLIMIT, requires_sandbox
from tests.server_signals import server_ignoring
from tests.tools.harness import run_command, text_of

pytestmark = requires_sandbox


def sandbox(view: View, *, limits: Limits | None = None, network: bool = False) -> Sandbox:
    return Sandbox(
        kind="bwrap", view=view, bwrap=BWRAP, prlimit=PRLIMIT, limits=limits or Limits(), network=network
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


async def test_the_workspace_is_the_only_writable_place(tmp_path: Path, workspace: Path) -> None:
    outside = (tmp_path / "outside").resolve()
    outside.mkdir()
    (outside / "notes.txt").write_text("readable\n")
    jail = sandbox(View(host=True, writable=(workspace,), readable=(outside,))).command(network=False)

    code, output = await run_command(
        jail, f"echo in > inside.txt; cat {outside}/notes.txt; echo out > {outside}/escape.txt", workspace
    )

    assert text_of(workspace / "inside.txt") == "in\n"
    assert "readable" in output
    assert "Read-only file system" in output, output
    assert not (outside / "escape.txt").exists()
    assert code != 0


async def test_a_private_tmp_vanishes_with_the_command(tmp_path: Path, workspace: Path) -> None:
    marker = f"/tmp/forge-sandbox-{secrets.token_hex(4)}"
    jail = sandbox(View(host=True, writable=(workspace,))).command(network=False)
    code, output = await run_command(jail, f"echo private > {marker} && cat {marker}", workspace)
    assert (code, output) == (0, "private\n")
    assert not await asyncio.to_thread(Path(marker).exists)


async def test_hidden_directories_are_empty_wherever_they_lie(tmp_path: Path, workspace: Path) -> None:
    # The server's data inside the workspace (a server run from a parent of its data directory),
    # and a tenant's own directory inside that hidden data directory, bound again.
    data = workspace / "data"
    (data / "tenants" / "other").mkdir(parents=True)
    (data / "agentforge.db").write_text("every tenant's rows\n")
    (data / "tenants" / "other" / "secret.txt").write_text("other's secret\n")
    own = data / "tenants" / "mine" / "tool-output"
    own.mkdir(parents=True)
    (own / "spill.txt").write_text("my output\n")
    view = View(host=True, writable=(workspace,), readable=(own,), hidden=(data,))

    _, output = await run_command(
        sandbox(view).command(network=False),
        "ls -A data/tenants; cat data/agentforge.db; cat data/tenants/other/secret.txt; "
        "cat data/tenants/mine/tool-output/spill.txt; echo x > data/tenants/mine/tool-output/new",
        workspace,
    )

    assert "every tenant's rows" not in output
    assert "other's secret" not in output
    assert "other" not in output.splitlines()[0], output  # only the bound path exists there
    assert "my output" in output
    assert "Read-only file system" in output
    assert not (own / "new").exists()


async def test_a_confined_view_holds_only_system_directories(tmp_path: Path, workspace: Path) -> None:
    server_home = Path.home()
    masked = (Path("/etc/shadow"),)
    jail = sandbox(View(host=False, writable=(workspace,), masked=masked)).command(network=False)

    _, output = await run_command(
        jail,
        f"ls {server_home} 2>&1; cat /etc/shadow 2>&1; test -x /usr/bin/env && echo usr-ok; pwd",
        workspace,
    )

    lines = output.splitlines()
    assert "No such file or directory" in lines[0], output
    assert "Permission denied" in lines[1], output  # masked by a device it may not open
    assert "root:" not in output
    assert "usr-ok" in lines
    assert lines[-1] == str(workspace)


async def test_the_network_is_off_unless_the_command_may_have_it(workspace: Path) -> None:
    connected = asyncio.Event()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    listener = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    probe_command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    view = View(host=True, writable=(workspace,))
    try:
        _, offline = await run_command(
            sandbox(view, network=True).command(network=False), probe_command, workspace
        )
        assert "connected" not in offline
        assert not connected.is_set()
        # The tenant may not have it at all: asking for it per command changes nothing.
        _, ungranted = await run_command(
            sandbox(view, network=False).command(network=True), probe_command, workspace
        )
        assert "connected" not in ungranted

        _, online = await run_command(
            sandbox(view, network=True).command(network=True), probe_command, workspace
        )
        assert online == "connected\n"
        assert connected.is_set()
    finally:
        listener.close()
        await listener.wait_closed()


async def test_its_own_pid_namespace_and_no_privileges(workspace: Path) -> None:
    jail = sandbox(View(host=True, writable=(workspace,))).command(network=False)
    code, output = await run_command(
        jail,
        "echo pid=$$; grep -E '^(NoNewPrivs|CapEff)' /proc/self/status; "
        f"test -e /proc/{os.getpid()} && echo sees-the-server; true",
        workspace,
    )
    assert code == 0, output
    assert int(output.split("pid=")[1].split()[0]) < 10  # its own PID namespace
    assert "NoNewPrivs:\t1" in output
    assert "CapEff:\t0000000000000000" in output
    assert "sees-the-server" not in output


def running_with(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


async def test_background_processes_die_with_the_command(workspace: Path) -> None:
    seconds = f"30.{secrets.randbelow(10**6):06d}"
    jail = sandbox(View(host=True, writable=(workspace,))).command(network=False)
    code, output = await run_command(jail, f"sleep {seconds} > /dev/null 2>&1 & echo started", workspace)
    assert (code, output) == (0, "started\n")
    # The PID namespace's first process is gone: the kernel kills the rest (asynchronously).
    deadline = time.monotonic() + 5
    while await asyncio.to_thread(running_with, f"sleep\0{seconds}"):
        assert time.monotonic() < deadline, "the background sleep outlived its command"
        await asyncio.sleep(0.02)


async def test_cpu_memory_and_file_size_limits(workspace: Path) -> None:
    limits = Limits(cpu_seconds=1, memory_bytes=64 * 1024 * 1024, file_size_bytes=1024 * 1024)
    jail = sandbox(View(host=True, writable=(workspace,)), limits=limits).command(network=False)

    code, output = await run_command(jail, "while :; do :; done", workspace)
    assert code != 0  # SIGXCPU after one second of CPU time

    code, output = await run_command(jail, "python3 -c 'bytearray(512 * 1024 * 1024)'", workspace)
    assert code != 0 and "MemoryError" in output, output

    code, output = await run_command(jail, "head -c 2097152 /dev/zero > big.bin", workspace)
    assert code != 0, output
    assert (workspace / "big.bin").stat().st_size <= 1024 * 1024


async def test_limits_reach_the_command_line(workspace: Path) -> None:
    limits = Limits(cpu_seconds=5, memory_bytes=1024, processes=7, file_size_bytes=2048)
    argv = (
        sandbox(View(host=True, writable=(workspace,)), limits=limits)
        .command(network=False)
        .wrap(["true"], workspace)
    )
    assert argv[argv.index("--") + 1 :] == [
        str(PRLIMIT),
        "--cpu=5:5",
        "--data=1024:1024",
        "--nproc=7:7",
        "--fsize=2048:2048",
        "--",
        "true",
    ]
    assert "--unshare-net" in argv


def test_limits_without_prlimit_refuse_rather_than_run_unlimited(workspace: Path) -> None:
    view = View(host=True, writable=(workspace,))
    unlimitable = Sandbox(kind="bwrap", view=view, bwrap=BWRAP, prlimit=None, limits=Limits(cpu_seconds=1))
    with pytest.raises(SandboxRefusedError, match="prlimit"):
        unlimitable.command(network=False).wrap(["true"], workspace)


async def test_a_refused_sandbox_starts_nothing(workspace: Path) -> None:
    jail = refused("no user namespaces here").command(network=False)
    with pytest.raises(SandboxRefusedError, match="no user namespaces here"):
        await run_command(jail, f"touch {workspace}/ran", workspace)
    assert not (workspace / "ran").exists()


async def test_unsandboxed_commands_run_as_given(workspace: Path) -> None:
    assert NO_SANDBOX.wrap(["bash", "-c", "x"], workspace) == ["bash", "-c", "x"]


def test_probe_names_what_is_wrong(tmp_path: Path) -> None:
    assert probe(BWRAP) is None
    assert "not an executable file" in (probe(tmp_path / "missing") or "")
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    reason = probe(fake) or ""
    assert "No permissions to create new namespace" in reason
    assert "user namespaces are unavailable" in reason


def test_the_env_giving_a_terminals_program_its_keys_back_is_probed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The host's env knows `--default-signal` (coreutils here) and gives a program the keys' signals
    back when it starts with them ignored (as bwrap does); an env that refuses the option (coreutils
    before 8.31 says 125, busybox 1) or none at all is no answer, said once in the log and kept; a
    probe that could not tell (killed) is asked again."""
    env = locate_default_signal_env()
    assert env is not None
    with server_ignoring(signal.SIGINT), server_ignoring(signal.SIGQUIT):
        argv = [str(env), "--default-signal=INT,QUIT", "--", "grep", "^SigIgn", "/proc/self/status"]
        started = subprocess.run(argv, capture_output=True, text=True, check=True)
    ignored = int(started.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGINT - 1) | 1 << (signal.SIGQUIT - 1))

    def env_that(script: str) -> str:
        directory = tmp_path / str(len(list(tmp_path.iterdir())))
        directory.mkdir()
        (directory / "env").write_text(f"#!/bin/sh\n{script}\n")
        (directory / "env").chmod(0o755)
        return str(directory)

    older = env_that("exit 125")  # coreutils' answer to an option it does not know
    busybox = env_that("exit 1")
    killed = env_that("kill -KILL $$")
    missing = env_that("exit 0")
    (Path(missing) / "env").unlink()
    with caplog.at_level(logging.WARNING, logger="agentforge.tools.sandbox"):
        for search in (older, busybox, missing, older, busybox, killed, killed):
            assert locate_default_signal_env(search) is None
    said = [record.getMessage() for record in caplog.records]
    assert said.count("no env with --default-signal found: ^C or ^\\ in a sandboxed terminal ends it") == 3
    assert [line for line in said if "was killed" in line] == [
        f"{Path(killed, 'env').resolve()} --default-signal=INT,QUIT was killed (9): tried again next time"
    ] * 2


async def test_no_directory_on_the_way_to_a_hidden_one_can_be_renamed(workspace: Path) -> None:
    # Renamed from inside, the hidden data would sit on the host at a path nothing hides or fences
    # (the server's own tools check paths by name): every directory between the workspace and a
    # hidden one is a mount point in the sandbox, which cannot be renamed.
    data = workspace / "srv" / "share" / "data"
    data.mkdir(parents=True)
    (data / "secret.txt").write_text("the server's\n")
    (workspace / "srv" / "other").mkdir()
    view = View(host=True, writable=(workspace,), hidden=(data,))
    _, output = await run_command(
        sandbox(view).command(network=False),
        "mv srv srv2; mv srv/share srv/share2; mv srv/share/data srv/share/data2; "
        "mv srv/other srv/other2 && echo renamed other",
        workspace,
    )
    assert output.count("Device or resource busy") == 3, output
    assert "renamed other" in output  # the rest of the workspace is as writable as before
    assert (data / "secret.txt").exists()
