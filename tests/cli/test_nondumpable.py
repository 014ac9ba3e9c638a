from __future__ import annotations

import subprocess
import sys

import pytest

from agentforge.cli.nondumpable import make_non_dumpable

# Reads the flag back from the kernel in a fresh process, before and after the call.
PROBE = """
import ctypes, ctypes.util
from agentforge.cli.nondumpable import make_non_dumpable

libc = ctypes.CDLL(ctypes.util.find_library("c"))
PR_GET_DUMPABLE = 3
before = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
applied = make_non_dumpable()
print(before, applied, libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux-only")
def test_the_process_becomes_non_dumpable_on_linux() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "True", "0"]


@pytest.mark.skipif(sys.platform.startswith("linux"), reason="a no-op only off Linux")
def test_elsewhere_nothing_happens() -> None:
    assert make_non_dumpable() is False
