"""Compaction and pruning through HTTP (KERNEL 6): overflow, summary, replay, tail, manual summarize."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentforge.session.context.compaction import CONTINUE_TEXT, SUMMARY_REQUEST
from agentforge.session.context.history import CLEARED_TOOL_OUTPUT, COMPACTION_QUESTION
from agentforge.store import Store
from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, reply
from tests.session.builders import Conversation, tool_completed
from tests.session.stored import store_conversation
from tests.store.builders import new_session

OVERFLOW_BODY = {
    "error": {
        "message": "This model's maximum context length is 10000 tokens. However, your messages resulted in "
        "12000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}


def small_model_config(fake: FakeOpenAI, **compaction: Any) -> dict[str, Any]:
    """usable = 10,000 - 1,000 = 9,000 tokens; the tail budget is a quarter of it (2,250)."""
    config = fake_provider_config(fake, limit={"context": 10_000, "output": 1_000})
    if compaction:
        config["compaction"] = compaction
    return config


def conversation(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every non-system message the model received."""
    out = []
    for message in request["messages"]:
        if message["role"] == "system":
            continue
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(c.get("text", "") for c in content)
        out.append((message["role"], content))
    return out


async def two_turns(live: LiveServer, session_id: str) -> None:
    live.fake.enqueue(reply("one"), reply("two"))
    for text in ("first", "second"):
        assert (await live.prompt(session_id, text)).status_code == 200


async def test_overflow_compacts_keeps_the_tail_and_continues(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = small_model_config(fake_openai)
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        session = await live.create_session()
        sid = session["id"]
        events = EventCollector()
        await events.start(live.client, f"/event?sessionID={sid}")
        await two_turns(live, sid)
        live.fake.enqueue(
            Script().text("three").usage(9_000, 20).finish(),  # fills the usable context
            reply("SUMMARY: the user asked three questions."),
            reply("Nothing left to do."),
        )
        result = (await live.prompt(sid, "third")).json()
        assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Nothing left to do."]

        summary_request, continued = live.fake.requests[3], live.fake.requests[4]
        # Only the oldest turn is summarised; the two newest stay verbatim.
        assert conversation(summary_request) == [
            ("user", "first"),
            ("assistant", "one"),
            ("user", SUMMARY_REQUEST),
        ]
        assert not summary_request.get("tools")
        assert conversation(continued) == [
            ("user", COMPACTION_QUESTION),
            ("assistant", "SUMMARY: the user asked three questions."),
            ("user", "second"),
            ("assistant", "two"),
            ("user", "third"),
            ("assistant", "three"),
            ("user", CONTINUE_TEXT),
        ]
        await events.wait_for(lambda f: f.type == "session.compacted")

        messages = (await live.client.get(f"/session/{sid}/message")).json()
        summaries = [m for m in messages if m["info"].get("summary")]
        assert len(summaries) == 1 and summaries[0]["info"]["agent"] == "compaction"
        request = next(m for m in messages if any(p["type"] == "compaction" for p in m["parts"]))
        part = request["parts"][0]
        assert part["auto"] is True and part["overflow"] is False
        second = next(m for m in messages if m["parts"] and m["parts"][0].get("text") == "second")
        assert part["tail_start_id"] == second["info"]["id"]

        # Later turns are built from the summary on, never from the summarised head.
        live.fake.enqueue(reply("four"))
        await live.prompt(sid, "fourth")
        later = conversation(live.fake.requests[5])
        assert ("user", "first") not in later and later[0] == ("user", COMPACTION_QUESTION)
        assert later[-1] == ("user", "fourth")
        await events.stop()


async def test_auto_false_never_compacts_and_the_turn_fails_with_context_overflow(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    config = small_model_config(fake_openai, auto=False)
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as live:
        sid = (await live.create_session())["id"]
        await two_turns(live, sid)
        live.fake.enqueue(Script().text("three").usage(9_000, 20).finish())
        assert (await live.prompt(sid, "third")).status_code == 200
        assert len(live.fake.requests) == 3  # no summary was asked for
        live.fake.enqueue(Script().error_status(400, OVERFLOW_BODY))
        result = (await live.prompt(sid, "fourth")).json()
        assert result["info"]["error"]["name"] == "ContextOverflowError"
        assert "maximum context length" in result["info"]["error"]["data"]["message"]
        assert len(live.fake.requests) == 4
        messages = (await live.client.get(f"/session/{sid}/message")).json()
        assert not any(p["type"] == "compaction" for m in messages for p in m["parts"])


async def test_provider_overflow_error_compacts_and_replays_the_request(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    await two_turns(live, sid)
    live.fake.enqueue(
        Script().error_status(400, OVERFLOW_BODY),
        reply("SUMMARY: first and second."),
        reply("three"),
    )
    result = (await live.prompt(sid, "third")).json()
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["three"]
    summary_request, replayed = live.fake.requests[3], live.fake.requests[4]
    # The overflowing request is not summarised: it is sent again after the summary and the tail.
    assert conversation(summary_request) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", SUMMARY_REQUEST),
    ]
    sent = conversation(replayed)
    assert sent[:4] == [
        ("user", COMPACTION_QUESTION),
        ("assistant", "SUMMARY: first and second."),
        ("user", "second"),
        ("assistant", "two"),
    ]
    # The replayed request comes once, last (wrapped as a message sent while the loop ran, since it
    # is newer than the summary, KERNEL 4.4 step 15).
    assert len(sent) == 5 and sent[4][0] == "user" and "third" in sent[4][1]
    messages = (await live.client.get(f"/session/{sid}/message")).json()
    part = next(p for m in messages for p in m["parts"] if p["type"] == "compaction")
    assert part["overflow"] is True
    assert [
        m["parts"][0]["text"]
        for m in messages
        if m["info"]["role"] == "user" and m["parts"][0].get("text") == "third"
    ] == ["third", "third"]


async def test_manual_summarize_runs_the_compaction_and_returns_true(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    await two_turns(live, sid)
    live.fake.enqueue(reply("SUMMARY: two greetings."))
    body = {"providerID": "fake", "modelID": "test-model"}
    response = await live.client.post(f"/session/{sid}/summarize", json=body)
    assert response.status_code == 200 and response.json() is True
    assert len(live.fake.requests) == 3  # no auto-continue for a manual summary
    assert conversation(live.fake.requests[2]) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", SUMMARY_REQUEST),
    ]
    live.fake.enqueue(reply("three"))
    await live.prompt(sid, "third")
    assert conversation(live.fake.requests[3]) == [
        ("user", COMPACTION_QUESTION),
        ("assistant", "SUMMARY: two greetings."),
        ("user", "second"),
        ("assistant", "two"),
        ("user", "third"),
    ]
    bad = await live.client.post(f"/session/{sid}/summarize", json={"providerID": "nope", "modelID": "x"})
    assert bad.status_code == 400
    missing = await live.client.post("/session/ses_missing/summarize", json=body)
    assert missing.status_code == 404


TOKENS = "abcd"  # one estimated token per four characters


async def test_pruning_marks_old_outputs_but_never_recent_turns_or_protected_tools(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str
) -> None:
    workspace = tmp_path / "workspace"
    session = new_session(directory=str(workspace))
    chat = Conversation(session_id=session.id)
    chat.user("one")
    old = tool_completed("read", {"filePath": "a"}, TOKENS * 30_000)
    skill = tool_completed("skill", {"name": "x"}, TOKENS * 50_000)
    chat.assistant(old, skill, finish="tool-calls")
    chat.assistant("read it")
    chat.user("two")
    kept = tool_completed("read", {"filePath": "b"}, TOKENS * 30_000)
    chat.assistant(kept, "done")
    chat.user("three")
    recent = tool_completed("bash", {"command": "ls"}, TOKENS * 100_000)
    chat.assistant(recent, "done")
    store = await Store.open(database_url)
    try:
        await store_conversation(store, session, chat.messages)
    finally:
        await store.close()

    async with start_live_server(tmp_path, fake_openai, database_url=database_url) as live:
        live.fake.enqueue(reply("four"))
        assert (await live.prompt(session.id, "four")).status_code == 200
        states = await _wait_for_pruned(live, session.id, old.id)
        assert states[old.id]["output"] == TOKENS * 30_000  # the stored output stays
        for part_id in (skill.id, kept.id, recent.id):
            assert "compacted" not in states[part_id]["time"], part_id
        live.fake.enqueue(reply("five"))
        await live.prompt(session.id, "five")
        results = {
            m["tool_call_id"]: m["content"] for m in live.fake.requests[-1]["messages"] if m["role"] == "tool"
        }
        assert results[old.call_id] == CLEARED_TOOL_OUTPUT
        assert results[skill.call_id] == TOKENS * 50_000


async def test_prune_false_leaves_every_output(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    workspace = tmp_path / "workspace"
    session = new_session(directory=str(workspace))
    chat = Conversation(session_id=session.id)
    for index in range(3):
        chat.user(f"q{index}")
        chat.assistant(tool_completed("read", {}, TOKENS * 40_000), "ok")
    url = f"sqlite:///{tmp_path / 'forge.db'}"
    store = await Store.open(url)
    try:
        await store_conversation(store, session, chat.messages)
    finally:
        await store.close()
    config = fake_provider_config(fake_openai)
    config["compaction"] = {"prune": False}
    async with start_live_server(tmp_path, fake_openai, config, database_url=url) as live:
        live.fake.enqueue(reply("ok"), reply("ok"))
        await live.prompt(session.id, "go")
        await live.prompt(session.id, "again")  # a prune would have landed before this turn's read
        tools = [m for m in live.fake.requests[-1]["messages"] if m["role"] == "tool"]
        assert tools and all(m["content"] != CLEARED_TOOL_OUTPUT for m in tools)


async def _wait_for_pruned(live: LiveServer, session_id: str, part_id: str) -> dict[str, dict[str, Any]]:
    """Tool states by part id, once pruning (which runs after the loop, in the background) landed."""
    await live.background_settled()
    messages = (await live.client.get(f"/session/{session_id}/message")).json()
    states = {p["id"]: p["state"] for m in messages for p in m["parts"] if p["type"] == "tool"}
    assert "compacted" in states[part_id]["time"], "pruning never marked the old output"
    return states
