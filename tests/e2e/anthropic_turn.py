"""The Anthropic-family turn the cloud transports (Bedrock, Vertex) are checked with: thinking with a
signature, text, a `write` tool call and usage, then a closing answer; and what must be stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.e2e.harness import LiveServer
from tests.fakes.anthropic_server import AnthropicScript

# USD per 1M tokens: input, output, cache read, cache write (Sonnet list prices).
PRICES = (3, 15, 0.3, 3.75)


def cloud_provider(provider_id: str, api: str, options: dict[str, Any], model_id: str) -> dict[str, Any]:
    """A config with one Anthropic-family cloud provider whose model `claude` is `model_id`."""
    inp, out, read, write = PRICES
    return {
        "model": f"{provider_id}/claude",
        "provider": {
            provider_id: {
                "api": api,
                "options": options,
                "models": {
                    "claude": {
                        "id": model_id,
                        "limit": {"context": 200_000, "output": 8192},
                        "cost": {"input": inp, "output": out, "cache_read": read, "cache_write": write},
                    }
                },
            }
        },
        "retry": {"max_attempts": 2},
        "title": False,
    }


def texts(message: dict[str, Any]) -> list[str]:
    return [p["text"] for p in message["parts"] if p["type"] == "text"]


@dataclass(frozen=True)
class WriteTurn:
    """Step 1: think (signed), say "Writing it.", write notes.txt; step 2: "Done.". Usage per step:
    (input, output, cache read, cache write)."""

    signature: str
    call_id: str
    first_usage: tuple[int, int, int, int]
    second_usage: tuple[int, int, int, int]
    thinking: str = "Plan the write."

    def scripts(self) -> tuple[AnthropicScript, AnthropicScript]:
        inp, out, read, write = self.first_usage
        first = (
            AnthropicScript()
            .thinking(self.thinking, signature=self.signature)
            .text("Writing it.")
            .tool_use("write", {"filePath": "notes.txt", "content": "hi\n"}, call_id=self.call_id)
            .usage(inp, out, cache_read=read, cache_write=write)
        )
        inp, out, read, write = self.second_usage
        return first, AnthropicScript().text("Done.").usage(inp, out, cache_read=read, cache_write=write)

    async def run_and_check(self, live: LiveServer) -> None:
        """Prompt a new session and check what the server stored for both steps."""
        session = await live.create_session()
        response = await live.prompt(session["id"], "Write notes.txt with hi.")
        assert response.status_code == 200, response.text
        assert (live.workspace / "notes.txt").read_text() == "hi\n"

        history = (await live.client.get(f"/session/{session['id']}/message")).json()
        assert [m["info"]["role"] for m in history] == ["user", "assistant", "assistant"]
        first, last = history[1], history[2]
        reasoning = [p for p in first["parts"] if p["type"] == "reasoning"]
        assert [p["text"] for p in reasoning] == [self.thinking]
        assert reasoning[0]["metadata"] == {"anthropic": {"signature": self.signature}}
        assert texts(first) == ["Writing it."]
        tool = next(p for p in first["parts"] if p["type"] == "tool")
        assert tool["tool"] == "write" and tool["callID"] == self.call_id
        assert tool["state"]["status"] == "completed"
        assert first["info"]["finish"] == "tool-calls"
        _check_usage(first["info"], self.first_usage)
        assert texts(last) == ["Done."]
        _check_usage(last["info"], self.second_usage)


def _check_usage(info: dict[str, Any], usage: tuple[int, int, int, int]) -> None:
    inp, out, read, write = usage
    tokens = info["tokens"]
    assert (tokens["input"], tokens["output"]) == (inp, out)
    assert tokens["cache"] == {"read": read, "write": write}
    # Hand-computed: each kind of token times its price per 1M.
    expected = sum(n * p for n, p in zip((inp, out, read, write), PRICES, strict=True)) / 1_000_000
    assert abs(info["cost"] - expected) < 1e-12
