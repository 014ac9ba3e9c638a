"""Fixtures for the plugin tests: plugin files written into tmp dirs, and a clean module table."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tools.harness import Harness

WritePlugin = Callable[[Path, str], Path]


# Modules the tests create are named with this prefix (files loaded by path get "agentforge_plugin_").
TEST_MODULE_PREFIX = "fixture_plugin_"


@pytest.fixture(autouse=True)
def forget_imported_plugins() -> Iterator[None]:
    """Plugin modules imported by a test are dropped afterwards, so the next test imports its own."""
    yield
    for name in list(sys.modules):
        if name.startswith((TEST_MODULE_PREFIX, "agentforge_plugin_")):
            del sys.modules[name]


def write_source(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


@pytest.fixture
def write_plugin() -> WritePlugin:
    return write_source


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return Harness(workspace=workspace, data_dir=tmp_path / "data")
