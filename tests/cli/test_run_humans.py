"""`agentforge run` without a terminal: permission requests and questions are answered by `--approve`,
shown on stderr, and a refusal exits with its own code. Driven through the real app and the fake
provider; the terminal case is in test_run_terminal.py."""

from __future__ import annotations

import json
import re
from typing import Any

from agentforge.cli import exits
from tests.cli.conftest import Cli
from tests.fakes.openai_server import FakeOpenAI, call, reply

QUESTION: dict[str, Any] = {
    "questions": [
        {
            "question": "Which database should I use?",
            "header": "Database",
            "options": [
                {"label": "SQLite", "description": "one file"},
                {"label": "Postgres", "description": "a server"},
            ],
        }
    ]
}


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_without_a_terminal_a_request_is_refused_and_the_run_exits_3(
    cli: Cli, fake_openai: FakeOpenAI
) -> None:
    # Reading a .env file asks by default.
    (cli.workspace / ".env").write_text("TOKEN=secret\n")
    fake_openai.enqueue(call("read", {"filePath": ".env"}), reply("never reached"))
    result = await cli.run_local("run", "read my .env")
    assert result.exit_code == exits.REFUSED, result.output
    lines = result.stderr.splitlines()
    assert "[permission] read wants read" in lines
    assert any(line.strip().endswith(".env") for line in lines), lines
    assert "--approve none: reject" in lines
    assert any(line.startswith("[refused] permission read refused") for line in lines)
    # Refused: the turn stopped there, the model was not asked again.
    assert len(fake_openai.requests) == 1
    assert "secret" not in result.stdout


async def test_approve_all_allows_once_and_the_turn_goes_on(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / ".env").write_text("TOKEN=secret\n")
    fake_openai.enqueue(call("read", {"filePath": ".env"}), reply("The token is set."))
    result = await cli.run_local("run", "read my .env", "--approve", "all")
    assert result.exit_code == exits.OK, result.output
    assert result.stdout == "The token is set.\n"
    assert "--approve all: once" in result.stderr.splitlines()
    assert "TOKEN=secret" in tool_results(fake_openai.requests[1])[0]


async def test_a_question_is_shown_and_dismissed_without_a_terminal(
    cli: Cli, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(call("question", QUESTION), reply("never reached"))
    result = await cli.run_local("run", "set up a database")
    assert result.exit_code == exits.REFUSED, result.output
    lines = result.stderr.splitlines()
    assert "[question] Which database should I use?" in lines
    assert "    1) SQLite - one file" in lines
    assert "    2) Postgres - a server" in lines
    assert "--approve none: question dismissed" in lines
    assert len(fake_openai.requests) == 1


async def test_approve_all_answers_a_question_with_its_first_option(
    cli: Cli, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(call("question", QUESTION), reply("SQLite it is."))
    result = await cli.run_local("run", "set up a database", "--approve", "all")
    assert result.exit_code == exits.OK, result.output
    assert result.stdout == "SQLite it is.\n"
    [answer] = tool_results(fake_openai.requests[1])
    assert '"Which database should I use?"="SQLite"' in answer


async def test_asking_needs_a_terminal(cli: Cli) -> None:
    result = await cli.run_local("run", "hello", "--approve", "ask")
    assert result.exit_code == exits.USAGE
    assert "asking needs a terminal" in result.stderr


async def test_json_format_prints_one_event_per_line(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / ".env").write_text("TOKEN=secret\n")
    fake_openai.enqueue(call("read", {"filePath": ".env"}), reply("done"))
    result = await cli.run_local("run", "read it", "--format", "json", "--approve", "all")
    assert result.exit_code == exits.OK, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [event["type"] for event in events]
    assert "permission.asked" in kinds and "permission.replied" in kinds
    assert "message.part.delta" in kinds
    assert kinds[-1] == "run.result"
    final = events[-1]["properties"]
    assert final["info"]["role"] == "assistant"
    assert [part["text"] for part in final["parts"] if part["type"] == "text"] == ["done"]


async def test_the_message_can_come_from_stdin(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("piped"), reply("dashed"))
    piped = await cli.run_local("run", input="question from a pipe\n")
    assert piped.exit_code == exits.OK, piped.output
    dashed = await cli.run_local("run", "-", input="question after a dash")
    assert dashed.exit_code == exits.OK, dashed.output
    sent = [request["messages"][-1]["content"] for request in fake_openai.requests]
    assert sent == ["question from a pipe\n", "question after a dash"]
    empty = await cli.run_local("run", input="  \n")
    assert empty.exit_code == exits.USAGE
    assert "the message is empty" in empty.stderr


async def test_continue_picks_the_last_session_of_this_directory(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("first"), reply("second"))
    first = await cli.run_local("run", "one")
    second = await cli.run_local("run", "two", "--continue")
    assert second.exit_code == exits.OK, second.output
    assert first.stderr.splitlines()[0] == second.stderr.splitlines()[0]  # "session ses_..."
    contents = [m["content"] for m in fake_openai.requests[1]["messages"] if m["role"] != "system"]
    assert contents == ["one", "first", "two"]
    both = await cli.run_local("run", "three", "--continue", "--session", "ses_x")
    assert both.exit_code == exits.USAGE


async def test_the_footer_shows_usage_and_cost_and_tools_show_their_output(
    cli: Cli, fake_openai: FakeOpenAI
) -> None:
    (cli.workspace / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    fake_openai.enqueue(call("read", {"filePath": "notes.txt"}), reply("four lines"))
    result = await cli.run_local("run", "read my notes")
    assert result.exit_code == exits.OK, result.output
    lines = result.stderr.splitlines()
    # Both steps' usage (10 in, 5 out each, from the fake), no price configured.
    assert lines[-1] == "tokens 20 in · 10 out · $0.0000"
    result_line = next(i for i, line in enumerate(lines) if line.startswith("[ok]   read"))
    preview = lines[result_line + 1 : result_line + 5]
    assert all(line.startswith("    ") for line in preview), lines
    assert "notes.txt</path>" in preview[0]
    assert re.fullmatch(r"    … \d+ more lines", preview[3])


async def test_server_logs_go_to_a_file_not_the_terminal(cli: Cli, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("hi"), reply("hi again"))
    result = await cli.run_local("run", "hello")
    assert result.exit_code == exits.OK, result.output
    log = cli.data_dir / "log" / "agentforge.log"
    assert "No turn was left running" in log.read_text()
    assert "No turn was left running" not in result.stderr
    verbose = await cli.run_local("run", "hello", "--verbose")
    assert "No turn was left running" in verbose.stderr


async def test_a_subagents_request_is_answered_too(cli: Cli, fake_openai: FakeOpenAI) -> None:
    (cli.workspace / ".env").write_text("TOKEN=secret\n")
    task = {"description": "Read the env", "prompt": "Read .env", "subagent_type": "general"}
    fake_openai.enqueue(
        call("task", task),  # the run's session starts a subagent
        call("read", {"filePath": ".env"}),  # the subagent, in a child session, asks
        reply("The file sets TOKEN."),  # the subagent's answer
        reply("The subagent says TOKEN is set."),
    )
    result = await cli.run_local("run", "delegate reading .env", "--approve", "all")
    assert result.exit_code == exits.OK, result.output
    assert "[permission] read wants read" in result.stderr.splitlines()
    assert "--approve all: once" in result.stderr.splitlines()
    assert result.stdout == "The subagent says TOKEN is set.\n"
    assert "TOKEN=secret" in tool_results(fake_openai.requests[2])[0]
