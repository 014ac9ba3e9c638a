"""Command templates (KERNEL 4.8): loading, argument tokenising, placeholders, shell snippets, @references."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentforge.config import Config, ConfigError
from agentforge.session.access import RequestAccess
from agentforge.session.channels.commands import (
    Command,
    expand,
    load_commands,
    run_shell_snippets,
    tokenize,
)
from agentforge.session.channels.references import prompt_parts
from agentforge.session.errors import InvalidInputError
from agentforge.session.inputs import AgentPartInput, FilePartInput, TextPartInput
from agentforge.testing.tools import refuse_outside, tool_context, unconfined
from agentforge.tools.sandbox import NO_SANDBOX


def local_access(workspace: Path) -> RequestAccess:
    """What the local user's request may name: the workspace, nothing outside it."""
    return RequestAccess(tool_context(workspace, workspace, confinement=unconfined(), ask=refuse_outside))


def test_tokenize_keeps_quoted_strings_and_image_tokens_whole() -> None:
    assert tokenize("""a "b c" 'd e' [Image 1] f""") == ["a", "b c", "d e", "[Image 1]", "f"]
    assert tokenize("   ") == []


@pytest.mark.parametrize(
    ("template", "arguments", "expected"),
    [
        ("Fix $1 in $2", "bug main.py", "Fix bug in main.py"),
        ("Fix $1 in $2", "bug main.py utils.py", "Fix bug in main.py utils.py"),
        ("Fix $1 in $2", "bug", "Fix bug in"),
        ("Use $1 then $1 again, $2", "x y z", "Use x then x again, y z"),
        ("All: $ARGUMENTS.", "one 'two three'", "All: one 'two three'."),
        ("$1 and $ARGUMENTS", "a b", "a b and a b"),
        ("No placeholder", "extra words", "No placeholder\n\nextra words"),
        ("No placeholder", "", "No placeholder"),
        ("  padded $1  ", "x", "padded x"),
    ],
)
def test_expand(template: str, arguments: str, expected: str) -> None:
    assert expand(template, arguments) == expected


def test_hints_list_the_placeholders_in_order() -> None:
    command = Command(name="c", template="$2 $1 $ARGUMENTS $2")
    assert command.hints == ["$1", "$2", "$ARGUMENTS"]


def test_markdown_commands_override_config_commands(tmp_path: Path) -> None:
    directory = tmp_path / ".agentforge" / "commands"
    directory.mkdir(parents=True)
    (directory / "test.md").write_text("---\ndescription: From the file\nsubtask: true\n---\nRun $1\n")
    config = Config.model_validate(
        {"command": {"test": {"template": "old"}, "lint": {"template": "Lint it", "agent": "build"}}}
    )
    commands = load_commands(config, tmp_path)
    assert commands["test"] == Command(
        name="test", template="Run $1", description="From the file", subtask=True
    )
    assert commands["lint"] == Command(name="lint", template="Lint it", agent="build")


@pytest.mark.parametrize(
    "raw",
    [{"description": "no template"}, {"template": 3}, {"template": "t", "subtask": "yes"}, "just text"],
)
def test_malformed_config_commands_are_config_errors(raw: object, tmp_path: Path) -> None:
    config = Config.model_validate({"command": {"bad": raw}})
    with pytest.raises(ConfigError, match=r"command\.bad"):
        load_commands(config, tmp_path)


async def test_shell_snippets_run_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("")
    text = await run_shell_snippets(
        "Files: !`ls` and !`echo $GREETING`.",
        cwd=tmp_path,
        env={
            **os.environ,
            "GREETING": "hi",
        },
        sandbox=lambda _command: NO_SANDBOX,
    )
    assert text == "Files: marker.txt and hi."
    unchanged = await run_shell_snippets(
        "no snippets", cwd=tmp_path, env=dict(os.environ), sandbox=lambda _command: NO_SANDBOX
    )
    assert unchanged == "no snippets"


async def test_references_name_files_directories_and_agents(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print(1)\n")
    text = "Look at @src/app.py and @src, ask @helper now; ignore @missing.txt, mail@example.com and `@code`."
    parts = await prompt_parts(text, access=local_access(tmp_path), agents=["helper", "build"])

    assert isinstance(parts[0], TextPartInput) and parts[0].text == text
    files = [p for p in parts if isinstance(p, FilePartInput)]
    assert [(f.filename, f.mime, f.url) for f in files] == [
        ("src/app.py", "text/plain", (tmp_path / "src" / "app.py").resolve().as_uri()),
        ("src", "application/x-directory", (tmp_path / "src").resolve().as_uri()),
    ]
    assert files[0].source is not None and files[0].source.text is not None
    assert text[files[0].source.text.start : files[0].source.text.end] == "@src/app.py"
    agents = [p for p in parts if isinstance(p, AgentPartInput)]
    assert [a.name for a in agents] == ["helper"]
    assert len(parts) == 4


async def test_a_reference_outside_the_workspace_fails_whether_or_not_it_exists(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    for name in ("../secret.txt", "../nothing-here.txt", str(tmp_path / "secret.txt")):
        with pytest.raises(InvalidInputError, match="outside the workspace"):
            await prompt_parts(f"look at @{name}", access=local_access(workspace), agents=[])
