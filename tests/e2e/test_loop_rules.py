"""Loop rules through HTTP: the stop-with-tool-calls fallback and the step limit."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply


async def test_tool_calls_reported_with_stop_still_get_their_results_back(live: LiveServer) -> None:
    session = await live.create_session()
    (live.workspace / "a.txt").write_text("alpha\n")
    live.fake.enqueue(
        Script().tool_call("read", {"filePath": "a.txt"}).finish("stop"),
        reply("It says alpha."),
    )
    result = (await live.prompt(session["id"], "read a.txt")).json()
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["It says alpha."]
    assert len(live.fake.requests) == 2
    tool_results = [m for m in live.fake.requests[1]["messages"] if m["role"] == "tool"]
    assert "alpha" in tool_results[0]["content"]


async def test_step_limit_turns_tools_off_and_asks_for_a_summary(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = fake_provider_config(fake_openai)
    config["agent"] = {"build": {"steps": 2}}
    async with start_live_server(tmp_path, fake_openai, config) as live:
        session = await live.create_session()
        live.fake.enqueue(
            call("list", {}),
            Script().text("Summary: I listed the files; nothing else was done.").finish("stop"),
        )
        result = (await live.prompt(session["id"], "keep exploring")).json()
        assert result["info"]["finish"] == "stop"
        assert len(live.fake.requests) == 2
        first, last = live.fake.requests
        assert first.get("tools"), "tools are offered before the limit"
        assert not last.get("tools"), "the last allowed step has no tools"
        assert "MAXIMUM STEPS REACHED" in last["messages"][-1]["content"]
        assert last["messages"][-1]["role"] == "assistant"
