"""Fixtures for the tool tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.harness import Harness


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return Harness(workspace=workspace, data_dir=tmp_path / "data")
