"""Doctor's checks of the command sandbox and the audit checkpoints (no database)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agentforge.config import Settings, load_settings
from agentforge.doctor.confinement import check_checkpoints, check_sandbox, latest_checkpoints
from agentforge.runtime.checkpoints import checkpoint_file, checkpoint_key
from agentforge.store.audit_checkpoints import CheckpointError, Head, append_checkpoint
from tests.sandboxing import requires_sandbox


def _settings(tmp_path: Path, **config: Any) -> Settings:
    return load_settings(data_dir=tmp_path / "data", directory=tmp_path, config_override=config)


def _broken(tmp_path: Path) -> dict[str, str]:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    return {"bwrap": str(fake)}


@requires_sandbox
def test_a_working_sandbox_passes(tmp_path: Path) -> None:
    result = check_sandbox(_settings(tmp_path, sandbox={"network": ["acme"]}))
    assert result.status == "pass", result.detail
    assert "bubblewrap" in result.detail and "network for: acme" in result.detail


def test_no_sandbox_where_tenants_are_granted_commands_is_critical(tmp_path: Path) -> None:
    granted = {"tenancy": {"shell": ["acme"]}}
    for sandbox in (_broken(tmp_path), {"mode": "off"}):
        result = check_sandbox(_settings(tmp_path, sandbox=sandbox, **granted))
        assert (result.status, result.critical) == ("fail", True), result.detail
        assert "tenancy.shell grants commands to acme" in result.detail
    required = check_sandbox(_settings(tmp_path, sandbox={**_broken(tmp_path), "mode": "required"}))
    assert (required.status, required.critical) == ("fail", True)
    assert "every command is refused" in required.detail


def test_no_sandbox_without_grants_is_a_warning(tmp_path: Path) -> None:
    result = check_sandbox(_settings(tmp_path, sandbox=_broken(tmp_path)))
    assert result.status == "warn"
    assert "Permission denied" in result.detail and "tenants' are refused" in result.detail
    assert check_sandbox(_settings(tmp_path, sandbox={"mode": "off"})).status == "warn"


def _checkpoint(settings: Settings, *, age_seconds: float) -> None:
    key = checkpoint_key(settings, create=True)
    at = int((time.time() - age_seconds) * 1000)
    append_checkpoint(checkpoint_file(settings), key.sign({"default": Head(1, "0" * 64)}, at=at))


def _check(settings: Settings) -> Any:
    try:
        return check_checkpoints(settings, latest_checkpoints(settings))
    except CheckpointError as exc:
        return check_checkpoints(settings, exc)


def test_the_latest_checkpoint_must_be_recent(tmp_path: Path) -> None:
    settings = _settings(tmp_path, audit={"checkpoint_interval": 60})
    assert _check(settings).status == "skip"  # none yet: the server takes one when it starts
    _checkpoint(settings, age_seconds=300)
    stale = _check(settings)
    assert (stale.status, stale.critical) == ("fail", False)
    assert "more than 120 s" in stale.detail
    _checkpoint(settings, age_seconds=0)
    fresh = _check(settings)
    assert fresh.status == "pass" and "2 signed" in fresh.detail

    off = _settings(tmp_path / "off", audit={"checkpoint_interval": 0})
    assert _check(off).status == "warn"


def test_a_tampered_checkpoint_file_fails(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    _checkpoint(settings, age_seconds=0)
    path = checkpoint_file(settings)
    line = json.loads(path.read_text())
    line["heads"]["default"]["seq"] = 7
    path.write_text(json.dumps(line) + "\n")
    result = _check(settings)
    assert result.status == "fail"
    assert "the signature does not match its contents" in result.detail
