from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from agentforge.testing.tools import unconfined
from agentforge.tools.base import OutsideWorkspaceError, PermissionDeniedError, PermissionRequest, ToolError
from agentforge.tools.builtin.bash import BashTool
from agentforge.tools.confinement import Confinement, ProcessEnv, WorkspaceBoundary
from agentforge.tools.fence import Fence
from agentforge.tools.sandbox import UNSANDBOXED, Sandbox, View
from agentforge.tools.truncation import TruncationLimits
from tests.sandboxing import BWRAP, PRLIMIT, requires_sandbox
from tests.tools.harness import Harness, real, size_of, text_of


def process_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (an exited child nobody reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        state = stat.read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


async def gone_soon(pid: int, within: float = 1.0) -> bool:
    """A SIGKILLed process disappears asynchronously: give the kernel a moment."""
    deadline = time.monotonic() + within
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def wait_for_output_line(harness: Harness, within: float = 5.0) -> str:
    """The first complete line the command printed, from the live metadata updates."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for _, metadata in harness.updates:
            output = metadata.get("output", "")
            if "\n" in output:
                return str(output.split("\n", 1)[0])
        await asyncio.sleep(0.02)
    raise AssertionError("the command printed nothing")


async def test_runs_a_command_and_reports_output_and_exit(harness: Harness) -> None:
    result = await harness.run(BashTool(), command="echo hello", description="Say hello")
    assert result.output == "hello\n"
    assert result.title == "Say hello"
    assert result.metadata == {
        "output": "hello\n",
        "exit": 0,
        "description": "Say hello",
        "truncated": False,
    }


async def test_stderr_is_combined_and_exit_code_kept(harness: Harness) -> None:
    result = await harness.run(
        BashTool(), command="echo out; echo err >&2; exit 3", description="Fail on purpose"
    )
    assert result.output == "out\nerr\n"
    assert result.metadata["exit"] == 3


async def test_empty_output_says_so(harness: Harness) -> None:
    result = await harness.run(BashTool(), command="true", description="Nothing")
    assert result.output == "(no output)"


async def test_stdin_is_closed(harness: Harness) -> None:
    started = time.monotonic()
    result = await harness.run(BashTool(), command="cat; echo after", description="Read stdin")
    assert result.output == "after\n"
    assert time.monotonic() - started < 5


async def test_runs_in_workspace_and_in_workdir(harness: Harness) -> None:
    (harness.workspace / "sub").mkdir()
    top = await harness.run(BashTool(), command="pwd -P", description="Where")
    assert top.output.strip() == str(harness.workspace.resolve())
    sub = await harness.run(BashTool(), command="pwd -P", workdir="sub", description="Where")
    assert sub.output.strip() == str((harness.workspace / "sub").resolve())


async def test_workdir_outside_workspace_is_refused(harness: Harness, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(BashTool(), command="pwd", workdir="..", description="Escape")
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(BashTool(), command="pwd", workdir=str(tmp_path), description="Escape")
    (harness.workspace / "link").symlink_to(tmp_path)
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(BashTool(), command="pwd", workdir="link", description="Escape")
    assert harness.asked("bash") == []


async def test_missing_workdir_is_an_error(harness: Harness) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        await harness.run(BashTool(), command="pwd", workdir="nope", description="Where")


async def test_file_commands_touching_outside_paths_are_refused(harness: Harness, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await harness.run(BashTool(), command="touch ../made.txt", description="Touch outside")
    assert not (tmp_path / "made.txt").exists()
    [external] = harness.asked("external_directory")
    assert external.patterns == [f"{real(tmp_path)}/*"]
    inside = await harness.run(BashTool(), command="touch made.txt && ls", description="Touch inside")
    assert inside.output == "made.txt\n"


async def test_bash_permission_patterns(harness: Harness) -> None:
    await harness.run(
        BashTool(), command="cd . && git --version >/dev/null; echo ok | cat", description="Check"
    )
    [ask] = harness.asked("bash")
    assert ask.patterns == ["git --version >/dev/null", "echo ok", "cat"]
    assert ask.always == ["git --version *", "echo *", "cat *"]


async def test_timeout_kills_the_command(harness: Harness) -> None:
    started = time.monotonic()
    result = await harness.run(
        BashTool(), command="echo started; sleep 20", timeout=300, description="Sleep long"
    )
    assert time.monotonic() - started < 3
    assert result.output.startswith("started\n")
    assert result.output.endswith(
        "<bash_metadata>\nbash tool terminated command after exceeding timeout 300 ms\n</bash_metadata>"
    )
    assert result.metadata["exit"] != 0


async def test_timeout_kills_the_whole_process_group(harness: Harness) -> None:
    result = await harness.run(
        BashTool(), command="sleep 20 & echo $!; wait", timeout=300, description="Background child"
    )
    child = int(result.output.split("\n", 1)[0])
    assert await gone_soon(child)


async def test_cancellation_kills_the_group_and_propagates_quickly(harness: Harness) -> None:
    task = asyncio.create_task(
        harness.run(BashTool(), command="sleep 30 & echo $! $$; wait", description="Sleep")
    )
    child, shell = (int(pid) for pid in (await wait_for_output_line(harness)).split())
    assert process_alive(child) and process_alive(shell)

    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - cancelled_at < 1.0
    assert not process_alive(shell)  # the leader is reaped before the cancellation returns
    assert await gone_soon(child, within=0.5)


async def test_process_ignoring_sigterm_is_killed_after_grace(harness: Harness) -> None:
    task = asyncio.create_task(
        harness.run(
            BashTool(kill_grace=0.3),
            command="trap '' TERM; echo $$; while true; do sleep 0.05; done",
            description="Stubborn",
        )
    )
    shell = int(await wait_for_output_line(harness))
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 0.3 <= time.monotonic() - cancelled_at < 1.5  # SIGTERM was ignored: SIGKILL after grace
    assert not process_alive(shell)


async def test_abort_event_stops_the_command_with_a_note(harness: Harness) -> None:
    ctx = harness.context()
    from agentforge.tools.execute import run_tool

    running = asyncio.create_task(
        run_tool(
            BashTool(),
            {"command": "echo $$; sleep 30", "description": "Sleep"},
            ctx,
            limits=harness.limits,
        )
    )
    shell = int(await wait_for_output_line(harness))
    ctx.abort.set()
    result = await asyncio.wait_for(running, 5)
    assert "<bash_metadata>\nUser aborted the command\n</bash_metadata>" in result.output
    assert not process_alive(shell)


async def test_live_metadata_updates_while_running(harness: Harness) -> None:
    result = await harness.run(
        BashTool(),
        command="for i in 1 2 3; do echo $i; sleep 0.3; done",
        description="Count slowly",
    )
    assert result.output == "1\n2\n3\n"
    outputs = [metadata["output"] for _, metadata in harness.updates]
    assert all(title == "Count slowly" for title, _ in harness.updates)
    assert all(metadata["description"] == "Count slowly" for _, metadata in harness.updates)
    assert outputs[0] == ""
    assert "1\n" in outputs and "1\n2\n" in outputs  # seen before the command finished
    # Throttled: about one update per 100 ms at most over a ~0.9 s run, not one per poll.
    assert len(harness.updates) <= 15


async def test_live_metadata_keeps_only_the_last_30000_chars(harness: Harness) -> None:
    await harness.run(
        BashTool(),
        command="head -c 40000 /dev/zero | tr '\\0' 'a'; echo; sleep 0.3",
        description="Lots",
    )
    longest = max(len(metadata["output"]) for _, metadata in harness.updates)
    assert longest == 30000


async def test_big_output_is_spilled_and_tail_returned(harness: Harness) -> None:
    result = await harness.run(BashTool(), command="seq 1 30000", description="Count")
    full = "".join(f"{i}\n" for i in range(1, 30001))
    assert result.metadata["truncated"] is True
    saved = Path(result.metadata["outputPath"])
    assert text_of(saved) == full
    assert saved.parent == harness.data_dir / "tool-output"
    assert result.output.startswith(f"...output truncated...\n\nFull output saved to: {saved}\n\n")
    tail = result.output.split("\n\n", 2)[2]
    assert tail.endswith("29999\n30000\n")
    assert len(tail.encode()) <= 50 * 1024
    assert len(tail.split("\n")) <= 2000


async def test_many_short_lines_keep_the_last_2000(harness: Harness) -> None:
    result = await harness.run(BashTool(), command="seq 1 3000", description="Count")
    assert result.metadata["truncated"] is True
    saved = Path(result.metadata["outputPath"])
    assert text_of(saved) == "".join(f"{i}\n" for i in range(1, 3001))
    tail = result.output.split("\n\n", 2)[2]
    lines = tail.split("\n")
    assert len(lines) == 2000
    assert lines[-2:] == ["3000", ""]


async def test_custom_limits(harness: Harness) -> None:
    tool = BashTool(limits=TruncationLimits(max_lines=3, max_bytes=1000))
    result = await tool_output(harness, tool, "seq 1 10")
    # Like the truncation of other tools, the empty segment after the final newline is a line.
    assert result.endswith("\n\n9\n10\n")


async def tool_output(harness: Harness, tool: BashTool, command: str) -> str:
    return (await harness.run(tool, command=command, description="Run")).output


async def test_background_child_holding_stdout_does_not_block(harness: Harness) -> None:
    started = time.monotonic()
    result = await harness.run(BashTool(), command="sleep 20 & echo $!", description="Detach")
    assert time.monotonic() - started < 2
    child = int(result.output.strip())
    os.kill(child, signal.SIGKILL)


async def test_invalid_timeout_is_rejected(harness: Harness) -> None:
    with pytest.raises(ToolError, match="`timeout` should be greater than 0"):
        await harness.run(BashTool(), command="true", timeout=0, description="Nothing")


async def test_description_is_required(harness: Harness) -> None:
    with pytest.raises(ToolError, match="`description` is required"):
        await harness.run(BashTool(), command="true")


async def test_output_faster_than_we_consume_is_not_lost(harness: Harness) -> None:
    size = 8 * 1024 * 1024
    result = await harness.run(BashTool(), command=f"head -c {size} /dev/zero", description="Flood")
    saved = Path(result.metadata["outputPath"])
    assert size_of(saved) == size


# --- a confined tenant -------------------------------------------------------------------------

SECRET_NAME = "FORGE_TEST_SERVER_SECRET"


def confine(harness: Harness, tmp_path: Path, **declared: str) -> None:
    env = ProcessEnv(inherit=False, home=harness.workspace, tmpdir=tmp_path / "tmp", declared=declared)
    boundary = WorkspaceBoundary(workspace=harness.workspace.resolve())
    harness.confinement = Confinement(
        env=env, boundary=boundary, fence=Fence(), sandbox=UNSANDBOXED, shell_denied=None
    )
    harness.approve_external = True  # only the boundary may refuse


def env_of(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


async def test_a_confined_command_never_sees_the_servers_environment(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_NAME, "hunter2")
    confine(harness, tmp_path, REGION="eu-1")
    env = env_of((await harness.run(BashTool(), command="env", description="Show env")).output)
    assert SECRET_NAME not in env
    assert env["HOME"] == str(harness.workspace)
    assert env["TMPDIR"] == str(tmp_path / "tmp")
    assert env["REGION"] == "eu-1"
    assert env["TERM"] == "dumb"


async def test_an_unconfined_command_inherits_the_servers_environment(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_NAME, "hunter2")
    env = env_of((await harness.run(BashTool(), command="env", description="Show env")).output)
    assert env[SECRET_NAME] == "hunter2"


async def test_a_confined_workdir_and_file_arguments_stay_in_the_workspace(
    harness: Harness, tmp_path: Path
) -> None:
    confine(harness, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(OutsideWorkspaceError, match="outside this tenant's workspace"):
        await harness.run(BashTool(), command="ls", workdir=str(outside), description="List")
    with pytest.raises(OutsideWorkspaceError, match="outside this tenant's workspace"):
        await harness.run(BashTool(), command="cat /etc/hostname", description="Read hostname")
    assert harness.asked("external_directory") == []


async def test_a_tenant_without_the_shell_grant_runs_nothing(harness: Harness, tmp_path: Path) -> None:
    marker = harness.workspace / "ran"
    harness.confinement = Confinement(
        env=ProcessEnv(inherit=False), boundary=None, fence=Fence(), sandbox=UNSANDBOXED, shell_denied="acme"
    )
    with pytest.raises(ToolError, match="Running commands is disabled for tenant 'acme'"):
        await harness.run(BashTool(), command=f"touch {marker}", description="Touch")
    assert not marker.exists()


# --- the paths a command names, and the network ---------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "cat < /etc/passwd",
        "head -1 /etc/passwd",
        "python3 -c \"print(open('/etc/passwd').read())\"",
        "x=/etc; cat $x/passwd",
        "grep root /etc/passwd",
        "bash -c 'tail -n 1 /etc/passwd'",
    ],
)
async def test_reading_outside_the_workspace_asks_first(harness: Harness, command: str) -> None:
    with pytest.raises(OutsideWorkspaceError):
        await harness.run(BashTool(), command=command, description="Read outside")
    [external] = harness.asked("external_directory")
    assert external.patterns == ["/etc/*"]
    assert external.metadata["filepath"] == "/etc/passwd"
    assert harness.asked("bash") == []  # refused before the command itself was even asked about


async def test_a_redirect_writing_outside_the_workspace_asks_first(harness: Harness, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(OutsideWorkspaceError):
        await harness.run(BashTool(), command=f"echo x > {outside}/file", description="Write outside")
    assert not (outside / "file").exists()
    [external] = harness.asked("external_directory")
    assert external.patterns == [f"{real(outside)}/*"]


async def test_variables_of_the_commands_environment_are_followed(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGE_TEST_ELSEWHERE", str(tmp_path))
    with pytest.raises(OutsideWorkspaceError):
        await harness.run(BashTool(), command="ls $FORGE_TEST_ELSEWHERE", description="List")
    [external] = harness.asked("external_directory")
    assert external.patterns == [f"{real(tmp_path)}/*"]


async def test_paths_inside_the_workspace_and_devices_ask_nothing(harness: Harness) -> None:
    result = await harness.run(
        BashTool(),
        command="mkdir -p sub && echo hi > sub/a.txt && head -1 < sub/a.txt 2>/dev/null && cat sub/a.txt >&2",
        description="Inside",
    )
    assert result.output == "hi\nhi\n"
    assert harness.asked("external_directory") == []


class _RuleDenies(PermissionDeniedError):
    """How a rule's deny reaches a tool: the model may try another way (the loop goes on)."""

    blocks_loop = False
    refused_by = "rule"


def sandboxed(harness: Harness, *, network: bool) -> None:
    view = View(host=True, writable=(harness.workspace.resolve(),))
    jail = Sandbox(kind="bwrap", view=view, bwrap=BWRAP, prlimit=PRLIMIT, network=network)
    harness.confinement = unconfined(sandbox=jail)


@requires_sandbox
async def test_the_network_permission_is_asked_only_where_the_tenant_may_have_it(harness: Harness) -> None:
    sandboxed(harness, network=False)
    await harness.run(BashTool(), command="git --version", description="Version")
    assert harness.asked("network") == []

    sandboxed(harness, network=True)
    await harness.run(BashTool(), command="git --version", description="Version")
    [network] = harness.asked("network")
    assert (network.patterns, network.always) == (["git --version"], ["git --version *"])


@requires_sandbox
async def test_a_rule_denying_the_network_runs_the_command_offline(harness: Harness) -> None:
    sandboxed(harness, network=True)
    harness.approve_external = True  # /proc/net/dev is outside the workspace
    ask = harness.context().ask

    async def deny_network(request: PermissionRequest) -> None:
        if request.permission == "network":
            raise _RuleDenies("no network for you")
        await ask(request)

    # /proc is the sandbox's own: /proc/net/dev lists the interfaces of the command's namespace.
    interfaces = "awk 'NR > 2 {print $1}' /proc/net/dev"
    online = await harness.run(BashTool(), command=interfaces, description="Interfaces")
    assert online.output.split() == await host_interfaces()
    harness.ask_override = deny_network
    offline = await harness.run(BashTool(), command=interfaces, description="Interfaces")
    assert offline.output.split() == ["lo:"]  # a network namespace of its own, with nothing in it


async def host_interfaces() -> list[str]:
    text = await asyncio.to_thread(Path("/proc/net/dev").read_text)
    return [line.split()[0] for line in text.splitlines()[2:]]
