"""The demo provider (tests/fakes/demo.py): the config it writes serves turns with no provider key,
every request answered without a script enqueued."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.e2e.harness import start_live_server
from tests.fakes.demo import EchoingFakeOpenAI, last_user_text, write_config


def test_the_last_user_message_is_quoted_whatever_its_shape() -> None:
    def body(*messages: object) -> bytes:
        return json.dumps({"messages": list(messages)}).encode()

    assert (
        last_user_text(body({"role": "user", "content": "one"}, {"role": "user", "content": "two"})) == "two"
    )
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    assert last_user_text(body({"role": "user", "content": parts})) == "a b"
    assert last_user_text(body({"role": "system", "content": "rules"})) == ""
    assert last_user_text(b"not json") == ""
    assert last_user_text(b"[1, 2]") == ""


async def test_the_config_it_writes_answers_every_prompt(tmp_path: Path) -> None:
    async with EchoingFakeOpenAI() as fake:
        path = write_config(tmp_path, fake.base_url)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        async with start_live_server(tmp_path, fake, json.loads(path.read_text())) as live:
            session = await live.create_session()
            for text in ("hello there", "and again"):
                answer = await live.client.post(
                    f"/session/{session['id']}/message", json={"parts": [{"type": "text", "text": text}]}
                )
                assert answer.status_code == 200, answer.text
                said = [p["text"] for p in answer.json()["parts"] if p["type"] == "text"]
                assert said == [f"This is the demo provider. You said: {text}"]
        assert fake.requests == []  # nothing kept of what it answered
