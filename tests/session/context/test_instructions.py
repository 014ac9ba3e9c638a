"""Instruction files: found up the tree, the global file, config globs, each once, cached by mtime."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from agentforge.session.context.instructions import InstructionSources, configured_patterns, instructions
from agentforge.tools.confinement import WorkspaceBoundary


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    workspace = tmp_path / "workspace"
    nested = workspace / "pkg" / "sub"
    nested.mkdir(parents=True)
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    return {"workspace": workspace, "nested": nested, "config": config_dir, "root": tmp_path}


def sources(tree: dict[str, Path], directory: Path | None = None, *patterns: str) -> InstructionSources:
    return InstructionSources(
        directory=directory or tree["nested"],
        workspace=tree["workspace"],
        config_dir=tree["config"],
        patterns=patterns,
    )


async def test_agents_md_is_found_up_the_tree_nearest_first(tree: dict[str, Path]) -> None:
    (tree["workspace"] / "AGENTS.md").write_text("root rules")
    (tree["workspace"] / "pkg" / "AGENTS.md").write_text("package rules")
    (tree["workspace"] / "CLAUDE.md").write_text("not used: AGENTS.md was found")
    (tree["root"] / "AGENTS.md").write_text("outside the workspace: never read")
    found = await instructions(sources(tree))
    assert found == [
        f"Instructions from: {tree['workspace'] / 'pkg' / 'AGENTS.md'}\npackage rules",
        f"Instructions from: {tree['workspace'] / 'AGENTS.md'}\nroot rules",
    ]


async def test_falls_back_to_claude_md_then_context_md(tree: dict[str, Path]) -> None:
    (tree["workspace"] / "CONTEXT.md").write_text("context")
    assert await instructions(sources(tree)) == [
        f"Instructions from: {tree['workspace'] / 'CONTEXT.md'}\ncontext"
    ]
    (tree["nested"] / "CLAUDE.md").write_text("claude")
    assert await instructions(sources(tree)) == [f"Instructions from: {tree['nested'] / 'CLAUDE.md'}\nclaude"]


async def test_global_file_and_config_globs_follow_each_once(
    tree: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace = tree["workspace"]
    (workspace / "AGENTS.md").write_text("project")
    (tree["config"] / "AGENTS.md").write_text("global")
    docs = workspace / "docs"
    docs.mkdir()
    (docs / "b.md").write_text("style b")
    (docs / "a.md").write_text("style a")
    (docs / "empty.md").write_text("  \n")
    absolute = tree["root"] / "team.md"
    absolute.write_text("team")
    patterns = ("docs/*.md", "AGENTS.md", str(absolute), "https://example.com/rules.md", "missing/*.md")
    with caplog.at_level(logging.INFO, logger="agentforge.session.context.instructions"):
        found = await instructions(sources(tree, None, *patterns))
    assert [entry.split("\n", 1)[1] for entry in found] == ["project", "global", "style a", "style b", "team"]
    assert "Skipping instructions URL https://example.com/rules.md" in caplog.text


async def test_a_directory_outside_the_workspace_is_searched_alone(tree: dict[str, Path]) -> None:
    outside = tree["root"] / "elsewhere" / "deep"
    outside.mkdir(parents=True)
    (tree["root"] / "elsewhere" / "AGENTS.md").write_text("parent: not searched")
    (outside / "AGENTS.md").write_text("here")
    assert await instructions(sources(tree, outside)) == [f"Instructions from: {outside / 'AGENTS.md'}\nhere"]


async def test_changed_file_is_read_again(tree: dict[str, Path]) -> None:
    path = tree["workspace"] / "AGENTS.md"
    path.write_text("version one")
    assert (await instructions(sources(tree)))[0].endswith("version one")
    path.write_text("version two, longer")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert (await instructions(sources(tree)))[0].endswith("version two, longer")


def test_configured_patterns() -> None:
    assert configured_patterns(None) == ()
    assert configured_patterns("AGENTS.md") == ("AGENTS.md",)
    assert configured_patterns(["a.md", 3, " ", "b/*.md"]) == ("a.md", "b/*.md")
    assert configured_patterns({"a": 1}) == ()


async def test_a_confined_tenant_reads_no_instruction_file_outside_its_workspace(
    tree: dict[str, Path],
) -> None:
    workspace = tree["workspace"].resolve()
    (workspace / "AGENTS.md").write_text("tenant rules")
    (tree["config"] / "AGENTS.md").write_text("the server operator's own instructions")
    secret = tree["root"] / "server-secret.md"
    secret.write_text("database password")
    (workspace / "linked.md").symlink_to(secret)
    confined = InstructionSources(
        directory=workspace,
        workspace=workspace,
        config_dir=tree["config"],
        patterns=(str(secret), "linked.md"),
        boundary=WorkspaceBoundary(workspace),
    )
    assert await instructions(confined) == [f"Instructions from: {workspace / 'AGENTS.md'}\ntenant rules"]
