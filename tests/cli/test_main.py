"""The `agentforge` app itself: what it says about an option it does not know."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from agentforge.cli.main import app


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
