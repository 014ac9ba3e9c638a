"""Structured output through HTTP: `format: {type: "json_schema"}` and the StructuredOutput tool."""

from __future__ import annotations

from typing import Any

from agentforge.session.structured import CAPTURED, STRUCTURED_TOOL, SYSTEM_LINE
from tests.e2e.harness import LiveServer
from tests.fakes.openai_server import Script, call, reply

SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}


def _format(**extra: Any) -> dict[str, Any]:
    return {"type": "json_schema", "schema": SCHEMA, **extra}


def _tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == "tool"]


async def test_structured_output_returns_the_validated_json(live: LiveServer) -> None:
    session = await live.create_session(title="structured")
    live.fake.enqueue(call(STRUCTURED_TOOL, {"city": "Paris", "celsius": 21.5}))

    response = await live.prompt(session["id"], "Weather in Paris?", format=_format())

    assert response.status_code == 200, response.text
    info = response.json()["info"]
    assert info["structured"] == {"city": "Paris", "celsius": 21.5}
    assert info["finish"] == "stop" and "error" not in info
    [tool] = _tool_parts(response.json())
    assert tool["tool"] == STRUCTURED_TOOL and tool["state"]["output"] == CAPTURED
    # One model call: the captured output ends the turn.
    [request] = live.fake.requests
    assert request["tool_choice"] == "required"
    spec = next(t["function"] for t in request["tools"] if t["function"]["name"] == STRUCTURED_TOOL)
    assert spec["parameters"] == {k: v for k, v in SCHEMA.items() if k != "$schema"}
    system = "\n".join(m["content"] for m in request["messages"] if m["role"] == "system")
    assert SYSTEM_LINE in system
    # What the client reads back later is the same.
    stored = (await live.client.get(f"/session/{session['id']}/message/{info['id']}")).json()
    assert stored["info"]["structured"] == {"city": "Paris", "celsius": 21.5}


async def test_arguments_that_break_the_schema_go_back_to_the_model(live: LiveServer) -> None:
    session = await live.create_session(title="structured")
    live.fake.enqueue(
        call(STRUCTURED_TOOL, {"city": "Paris", "celsius": "warm"}),
        call(STRUCTURED_TOOL, {"city": "Paris", "celsius": 19}),
    )

    response = await live.prompt(session["id"], "Weather in Paris?", format=_format())

    assert response.json()["info"]["structured"] == {"city": "Paris", "celsius": 19}
    _, second = live.fake.requests
    assert second["tool_choice"] == "required"
    rejected = next(m for m in second["messages"] if m["role"] == "tool")
    assert "celsius" in rejected["content"] and "invalid" in rejected["content"]
    messages = (await live.client.get(f"/session/{session['id']}/message")).json()
    failed = _tool_parts(messages[1])[0]
    assert failed["state"]["status"] == "error" and "`celsius` is invalid" in failed["state"]["error"]


async def test_retries_are_limited_by_retry_count(live: LiveServer) -> None:
    session = await live.create_session(title="structured")
    live.fake.enqueue(
        call(STRUCTURED_TOOL, {"city": 1}),
        call(STRUCTURED_TOOL, {"town": "Paris"}),
        reply("never asked for"),
    )

    response = await live.prompt(session["id"], "Weather?", format=_format(retryCount=1))

    error = response.json()["info"]["error"]
    assert error["name"] == "StructuredOutputError"
    assert error["data"] == {
        "message": "Model did not produce valid structured output after 2 attempts",
        "retries": 2,
    }
    assert len(live.fake.requests) == 2 and live.fake.pending() == 1


async def test_a_reply_without_the_tool_is_the_named_error(live: LiveServer) -> None:
    session = await live.create_session(title="structured")
    live.fake.enqueue(reply("It is sunny in Paris."))

    response = await live.prompt(session["id"], "Weather?", format=_format())

    assert response.status_code == 200
    info = response.json()["info"]
    assert info["error"] == {
        "name": "StructuredOutputError",
        "data": {"message": "Model did not produce structured output", "retries": 0},
    }
    assert "structured" not in info
    # The session stays usable, and a plain prompt afterwards gets no StructuredOutput tool.
    live.fake.enqueue(Script().text("Plain answer.").finish())
    plain = await live.prompt(session["id"], "Just say it.")
    assert plain.json()["info"].get("error") is None
    tools = [t["function"]["name"] for t in live.fake.requests[-1].get("tools", [])]
    assert STRUCTURED_TOOL not in tools and "tool_choice" not in live.fake.requests[-1]


async def test_an_invalid_schema_is_refused_with_the_prompt(live: LiveServer) -> None:
    session = await live.create_session(title="structured")
    broken = {"type": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": 12}}}}

    response = await live.prompt(session["id"], "Weather?", format=broken)

    assert response.status_code == 400
    assert "not a valid JSON Schema" in response.json()["data"]["message"]
    assert live.fake.requests == []
