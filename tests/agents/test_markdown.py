"""Markdown agent files: front matter, body as prompt, and the two directories they are read from."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentforge.agents.markdown import parse_front_matter, read_definitions
from agentforge.agents.registry import agent_directories, load_agents
from agentforge.config import ConfigError, load_settings


def test_front_matter_and_body() -> None:
    text = "---\ndescription: Reviews code\ntemperature: 0.1\npermission:\n  edit: deny\n---\n\nBe strict.\n"
    fields, body = parse_front_matter(text, "r.md")
    assert fields == {"description": "Reviews code", "temperature": 0.1, "permission": {"edit": "deny"}}
    assert body == "Be strict."


@pytest.mark.parametrize(
    "text", ["Just a prompt.\n", "---\n---\nJust a prompt.", "\ufeff---\n\n---\nJust a prompt."]
)
def test_no_or_empty_front_matter(text: str) -> None:
    assert parse_front_matter(text, "x.md") == ({}, "Just a prompt.")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\n- a\n- b\n---\nbody", "front matter must be a mapping"),
        ("---\nkey: [unclosed\n---\nbody", "invalid front matter"),
    ],
)
def test_bad_front_matter_names_the_file(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"x.md: {message}"):
        parse_front_matter(text, "x.md")


def test_read_definitions_takes_md_files_by_name(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("---\nmode: subagent\n---\nB prompt")
    (tmp_path / "a.md").write_text("A prompt")
    (tmp_path / "notes.txt").write_text("ignored")
    found = read_definitions(tmp_path)
    assert [(d.name, d.fields, d.body) for d in found] == [
        ("a", {}, "A prompt"),
        ("b", {"mode": "subagent"}, "B prompt"),
    ]
    assert read_definitions(tmp_path / "missing") == []


def test_load_agents_reads_global_then_workspace_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    workspace = tmp_path / "workspace"
    global_dir, workspace_dir = agent_directories(workspace)
    assert global_dir == tmp_path / "xdg" / "agentforge" / "agents"
    global_dir.mkdir(parents=True)
    workspace_dir.mkdir(parents=True)
    (global_dir / "docs.md").write_text("---\ndescription: Global docs\nsteps: 5\n---\nGlobal prompt.")
    (workspace_dir / "docs.md").write_text("---\ndescription: Workspace docs\n---\nWorkspace prompt.")
    settings = load_settings(
        data_dir=tmp_path / "data", directory=workspace, config_override={"model": "a/b"}
    )
    docs = load_agents(settings).get("docs")
    assert (docs.description, docs.steps, docs.prompt, docs.mode) == (
        "Workspace docs",
        5,
        "Workspace prompt.",
        "all",
    )
