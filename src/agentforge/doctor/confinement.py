"""Checks of what keeps tenants' commands and the audit log honest: the OS sandbox and the audit
checkpoints. No database needed (the chains are compared with the checkpoints in database.py)."""

from __future__ import annotations

import datetime
import time

from agentforge.config import Settings
from agentforge.doctor.result import CheckResult, failed, passed, skipped, warned
from agentforge.runtime.checkpoints import checkpoint_file, checkpoint_key
from agentforge.runtime.sandboxing import unavailable_reason
from agentforge.store.audit_checkpoints import Checkpoint, CheckpointError, read_checkpoints, verified


def check_sandbox(settings: Settings) -> CheckResult:
    """Whether commands run in the OS sandbox here. Critical where tenants are granted commands
    (`tenancy.shell`) but their commands would run without one: `serve --production` refuses."""
    name = "command sandbox"
    config = settings.config.sandbox
    grantees = settings.config.tenancy.shell_grantees()
    granted = f"tenancy.shell grants commands to {', '.join(grantees)}" if grantees else ""
    if config.mode == "off":
        if granted:
            return failed(name, f"sandbox.mode is off, yet {granted}: they would run as the server's OS user")
        return warned(name, "sandbox.mode is off: commands run unsandboxed")
    reason, bwrap, _ = unavailable_reason(config)
    if reason is None:
        network = config.network if isinstance(config.network, str) else ", ".join(config.network) or "none"
        return passed(name, f"bubblewrap ({bwrap}); network for: {network}")
    if config.mode == "required":
        return failed(name, f"sandbox.mode is required but {reason}: every command is refused")
    if granted:
        return failed(name, f"{granted}, but {reason}: their commands are refused")
    return warned(name, f"{reason}: the local user's commands run unsandboxed, tenants' are refused")


def latest_checkpoints(settings: Settings) -> list[Checkpoint]:
    """The checkpoint file's checkpoints, signatures checked (CheckpointError when one fails;
    empty when there is no file yet). Blocking file IO."""
    path = checkpoint_file(settings)
    if not path.exists():
        return []
    return verified(read_checkpoints(path), checkpoint_key(settings, create=False), path)


def check_checkpoints(settings: Settings, checkpoints: list[Checkpoint] | CheckpointError) -> CheckResult:
    """The latest signed checkpoint is recent (and every one's signature holds)."""
    name = "audit checkpoints"
    audit = settings.config.audit
    if isinstance(checkpoints, CheckpointError):
        return failed(name, str(checkpoints), critical=False)
    if not checkpoints:
        if not audit.checkpoint_interval:
            return warned(name, "none yet and periodic ones are off: run `agentforge audit checkpoint`")
        return skipped(name, f"none yet in {checkpoint_file(settings)}: the server takes one when it starts")
    latest = max(checkpoint.time for checkpoint in checkpoints)
    age = time.time() - latest / 1000
    when = datetime.datetime.fromtimestamp(latest / 1000, datetime.UTC).isoformat(timespec="seconds")
    if age > audit.max_age():
        detail = f"the latest is from {when}, {age / 3600:.1f} h ago (more than {audit.max_age():g} s)"
        return failed(name, detail, critical=False)
    return passed(name, f"{len(checkpoints)} signed, the latest from {when}")
