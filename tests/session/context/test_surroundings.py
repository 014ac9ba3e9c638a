"""The system prompt's look at the file system: reused while nothing it depended on changed, looked
again (and so seen on the next model call) once an instruction file or a `.git` changes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest

from agentforge.session.context.surroundings import (
    RACY_SECONDS,
    LookAhead,
    Surroundings,
    SystemContext,
    known,
    look_around,
)

OLD = time.time() - 10 * RACY_SECONDS  # a modification time no change to come can share


def settle(*paths: Path) -> None:
    """As if these were last changed a while ago."""
    for path in paths:
        os.utime(path, (OLD, OLD))


@pytest.fixture
def repo(tmp_path: Path) -> SystemContext:
    """A session in a subdirectory of a git work tree, which is the workspace."""
    workspace = tmp_path / "repo"
    directory = workspace / "sub"
    directory.mkdir(parents=True)
    (workspace / ".git").mkdir()
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    return SystemContext(directory=directory, workspace=workspace, config_dir=config_dir)


def instructions(path: Path, text: str) -> str:
    return f"Instructions from: {path}\n{text}"


async def test_an_unchanged_tree_is_not_looked_at_again(repo: SystemContext) -> None:
    rules = repo.workspace / "AGENTS.md"
    rules.write_text("rules")
    settle(rules)
    assert known(repo) is None
    first = await look_around(repo)
    assert first == Surroundings(True, [instructions(rules, "rules")])
    assert known(repo) is first
    assert await look_around(repo) is first


async def test_a_new_instruction_file_is_seen_on_the_next_call(repo: SystemContext) -> None:
    assert await look_around(repo) == Surroundings(True, [])
    assert known(repo) is not None
    rules = repo.directory / "AGENTS.md"
    rules.write_text("nearest rules")
    assert known(repo) is None
    assert await look_around(repo) == Surroundings(True, [instructions(rules, "nearest rules")])


async def test_an_edited_instruction_file_is_read_again(repo: SystemContext) -> None:
    rules = repo.config_dir / "AGENTS.md"
    rules.write_text("global")
    settle(rules)
    assert await look_around(repo) == Surroundings(True, [instructions(rules, "global")])
    rules.write_text("global, edited")
    assert known(repo) is None
    assert await look_around(repo) == Surroundings(True, [instructions(rules, "global, edited")])


async def test_a_removed_git_directory_is_seen(repo: SystemContext) -> None:
    assert (await look_around(repo)).is_git
    (repo.workspace / ".git").rmdir()
    assert known(repo) is None
    assert not (await look_around(repo)).is_git


async def test_a_new_git_directory_is_seen(tmp_path: Path) -> None:
    directory = tmp_path / "project"
    directory.mkdir()
    context = SystemContext(directory=directory, workspace=directory, config_dir=tmp_path / "none")
    assert not (await look_around(context)).is_git
    (tmp_path / ".git").mkdir()  # above the session's directory
    assert known(context) is None
    assert (await look_around(context)).is_git


async def test_a_just_changed_instruction_file_is_looked_at_again(repo: SystemContext) -> None:
    (repo.directory / "AGENTS.md").write_text("changed now: within the time granularity")
    await look_around(repo)
    assert known(repo) is None


async def test_unrelated_changes_keep_the_result(repo: SystemContext) -> None:
    first = await look_around(repo)
    (repo.directory / "written_by_a_tool.txt").write_text("not an instruction file")
    (repo.workspace.parent / "elsewhere").mkdir()
    assert known(repo) is first


async def test_a_new_instruction_file_of_an_earlier_name_wins(repo: SystemContext) -> None:
    claude = repo.workspace / "CLAUDE.md"
    claude.write_text("claude")
    settle(claude)
    assert (await look_around(repo)).instructions == [instructions(claude, "claude")]
    agents = repo.workspace / "sub" / "AGENTS.md"
    agents.write_text("agents")
    assert known(repo) is None
    assert (await look_around(repo)).instructions == [instructions(agents, "agents")]


async def test_configured_globs_are_looked_up_every_time(repo: SystemContext) -> None:
    context = SystemContext(
        directory=repo.directory,
        workspace=repo.workspace,
        config_dir=repo.config_dir,
        instruction_patterns=("docs/*.md",),
    )
    assert await look_around(context) == Surroundings(True, [])
    assert known(context) is None
    guide = repo.workspace / "docs" / "guide.md"
    guide.parent.mkdir()
    guide.write_text("a guide")
    assert await look_around(context) == Surroundings(True, [instructions(guide, "a guide")])


async def test_a_look_up_started_ahead_is_handed_over_once(repo: SystemContext) -> None:
    rules = repo.workspace / "AGENTS.md"
    rules.write_text("rules")
    ahead = LookAhead(repo)

    taken = ahead.take()

    assert taken is not None and ahead.take() is None
    assert await taken == Surroundings(True, [instructions(rules, "rules")])
    ahead.drop()  # nothing left to end


async def test_a_look_up_nobody_took_is_ended(repo: SystemContext) -> None:
    # A prompt refused after it started the look-up drops it: still running, it is cancelled.
    ahead = LookAhead(repo)
    pending = ahead._pending
    assert pending is not None and not pending.done()

    ahead.drop()

    assert ahead.take() is None
    with contextlib.suppress(asyncio.CancelledError):
        await pending
    assert pending.cancelled()
