"""The committed bundle (src/agentforge/console/) is exactly what its sources in console/ build to.

Needs node and `npm ci` in console/ (`.ci/run` does both); skips saying so otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
SOURCES = REPOSITORY / "console"
BUNDLE = REPOSITORY / "src" / "agentforge" / "console"


def test_the_committed_bundle_matches_a_fresh_build(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not (SOURCES / "node_modules" / "esbuild").is_dir():
        pytest.skip("needs node and `npm ci` in console/ (.ci/run does both)")
    env = {**os.environ, "CONSOLE_OUT": str(tmp_path)}
    subprocess.run([node, "build.mjs"], cwd=SOURCES, env=env, check=True, timeout=120)
    built = sorted(p.name for p in tmp_path.iterdir())
    assert built == sorted(p.name for p in BUNDLE.iterdir())
    stale = [name for name in built if (tmp_path / name).read_bytes() != (BUNDLE / name).read_bytes()]
    assert stale == [], f"rebuild the console (cd console && npm ci && npm run build): {stale} differ"
