"""The `agentforge` app itself: what it says about an option it does not know, and its help."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from typer.testing import CliRunner

from agentforge.cli.main import COMMANDS, SUMMARIES, app, load_command


@pytest.mark.parametrize(
    ("args", "unknown", "suggested"),
    [
        (["run", "--bogus"], "--bogus", None),  # click suggested --verbose: the dashes looked close
        (["run", "--verbos"], "--verbos", "--verbose"),
        (["run", "--formt", "json"], "--formt", "--format"),
        (["serve", "--prot", "1"], "--prot", "--port"),
        (["session", "list", "--bogus"], "--bogus", None),
        (["session", "list", "--serach", "x"], "--serach", "--search"),
        (["--versio"], "--versio", "--version"),
        (["--bogus"], "--bogus", None),
    ],
)
def test_an_unknown_option_suggests_only_close_names(
    args: list[str], unknown: str, suggested: str | None
) -> None:
    result = CliRunner().invoke(app, args)

    assert result.exit_code == 2, result.output
    assert f"No such option: {unknown}" in result.output
    if suggested is None:
        assert "Possible options" not in result.output
    else:
        assert f"(Possible options: {suggested})" in result.output


def test_help_lists_every_command_with_its_own_help_text() -> None:
    assert list(SUMMARIES) == list(COMMANDS)
    for name in COMMANDS:
        command = load_command(name)
        assert (command.short_help, command.help) == (None, SUMMARIES[name]), name
    result = CliRunner().invoke(app, ["--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    assert "Check the database, row-level security" in result.output
    listed = [
        line.split()[1]
        for line in result.output.splitlines()
        if line.startswith("│ ") and line[2:3].isalpha()
    ]
    assert listed[-len(COMMANDS) :] == list(COMMANDS)


HELP_PROBE = (
    "import sys, json; from agentforge.cli.main import app, COMMANDS\n"
    "try:\n    app(['--help'], prog_name='agentforge')\nexcept SystemExit:\n    pass\n"
    "print(json.dumps(sorted({m for m, _ in COMMANDS.values()} & set(sys.modules))), file=sys.stderr)"
)


async def test_help_imports_no_command() -> None:
    pipe = asyncio.subprocess.PIPE
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", HELP_PROBE, stdout=pipe, stderr=pipe)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert b"Run the Agent Forge server." in out
    assert json.loads(err.decode().splitlines()[-1]) == []
