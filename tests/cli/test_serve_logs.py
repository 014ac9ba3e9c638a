"""`agentforge serve --log-format/--log-level`: the whole process logs structured lines."""

from __future__ import annotations

import asyncio
import json
import signal

import httpx2
import pytest

from tests.cli.conftest import Cli


async def test_serve_writes_json_lines_for_the_whole_app(cli: Cli) -> None:
    process, line = await cli.serve("--log-format", "json", "--log-level", "info")
    try:
        url = line.split()[-1]
        async with httpx2.AsyncClient(base_url=url) as client:
            response = await client.get("/session", headers={"X-Request-ID": "cli-req-1"})
            assert response.status_code == 200
            metrics = await client.get("/metrics")
            assert "agentforge_turns_started_total 0.0" in metrics.text
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    lines = [json.loads(text) for text in stderr.decode().splitlines() if text.strip()]
    assert lines, "the server logged nothing"
    assert all({"time", "level", "logger", "message"} <= entry.keys() for entry in lines)
    # uvicorn's coloured copy of its message is not a field of ours.
    assert any(entry["message"].startswith("Started server process") for entry in lines)
    assert not [entry for entry in lines if "color_message" in entry]
    loggers = {entry["logger"] for entry in lines}
    assert "agentforge.runtime.runtime" in loggers  # ours, not only uvicorn's
    access = [entry for entry in lines if entry["logger"] == "uvicorn.access"]
    assert any(entry.get("request_id") == "cli-req-1" for entry in access), access


async def test_serve_refuses_an_unknown_log_format_or_level(cli: Cli) -> None:
    result = await cli.invoke("serve", "--log-format", "xml", *cli.local)
    assert result.exit_code == 2 and "--log-format" in result.stderr
    result = await cli.invoke("serve", "--log-level", "loud", *cli.local)
    assert result.exit_code == 2 and "--log-level" in result.stderr


async def test_serve_help_lists_the_log_choices(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per option
    result = await cli.invoke("serve", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "debug|info|warning|error|critical" in text and "text|json" in text
