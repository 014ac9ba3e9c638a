from __future__ import annotations

import pytest

from agentforge.client import file_part, parse_model, routes


def test_prompt_body_from_text_with_options() -> None:
    body = routes.prompt_body(
        "hi", model="openai/gpt-4o", agent="build", system="be brief", no_reply=True, message_id=None
    )
    assert body == {
        "parts": [{"type": "text", "text": "hi"}],
        "model": {"providerID": "openai", "modelID": "gpt-4o"},
        "agent": "build",
        "system": "be brief",
        "noReply": True,
    }


def test_prompt_body_from_parts_leaves_unset_fields_out() -> None:
    parts = [{"type": "text", "text": "look"}, file_part("file:///a.png", "image/png")]
    body = routes.prompt_body(parts, model=None, agent=None, system=None, no_reply=False, message_id="msg_1")
    assert body == {
        "parts": [
            {"type": "text", "text": "look"},
            {"type": "file", "mime": "image/png", "url": "file:///a.png"},
        ],
        "messageID": "msg_1",
    }
    with pytest.raises(ValueError, match="at least one part"):
        routes.prompt_body([], model=None, agent=None, system=None, no_reply=False, message_id=None)


def test_parse_model_keeps_slashes_in_the_model_id() -> None:
    assert parse_model("openrouter/meta/llama-3") == {"providerID": "openrouter", "modelID": "meta/llama-3"}
    for bad in ("gpt-4o", "/m", "p/"):
        with pytest.raises(ValueError, match="provider/model"):
            parse_model(bad)


def test_paths_quote_ids_and_cursor_needs_limit() -> None:
    assert routes.message("ses_1", "msg/2").path == "/session/ses_1/message/msg%2F2"
    assert routes.messages("ses_1", 5, "cur").params == {"limit": 5, "before": "cur"}
    with pytest.raises(ValueError, match="needs `limit`"):
        routes.messages("ses_1", None, "cur")


def test_token_becomes_a_bearer_header() -> None:
    assert routes.client_headers("secret", {"X-Extra": "1"})["Authorization"] == "Bearer secret"
    assert "Authorization" not in routes.client_headers(None, None)
