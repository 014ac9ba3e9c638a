"""A stand-in model provider for trying Agent Forge without a provider key, from a checkout:

    python -m tests.fakes.demo                   # prints the config it wrote and the command below
    agentforge serve --config <the printed path>

It is the tests' wire-level fake OpenAI provider (tests/fakes/openai_server.py) answering every chat
request with a short streamed reply that quotes the last user message. It runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tests.fakes.http11 import Connection, Request
from tests.fakes.openai_server import FakeOpenAI, reply


class EchoingFakeOpenAI(FakeOpenAI):
    """Never runs out of scripts: a request finding none gets a reply quoting its last user message.
    Keeps no record of requests (it may run for hours)."""

    async def _chat_completions(self, conn: Connection, request: Request) -> bool:
        if not self._scripts:
            self.enqueue(reply(f"This is the demo provider. You said: {last_user_text(request.body)}"))
        try:
            return await super()._chat_completions(conn, request)
        finally:
            for record in (self.requests, self.request_headers, self.request_paths, self.request_queries):
                record.clear()


def last_user_text(body: bytes) -> str:
    """The text of the request's last user message ('' when there is none or it is not JSON)."""
    try:
        messages = json.loads(body).get("messages", [])
    except (ValueError, AttributeError):
        return ""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    if isinstance(content, list):  # parts: the text ones
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def demo_config(base_url: str) -> dict[str, Any]:
    """A config whose only provider is the demo provider at `base_url`."""
    return {
        "model": "demo/echo",
        "provider": {
            "demo": {
                "api": "openai",
                "options": {"baseURL": base_url, "apiKey": "not-a-secret"},
                "models": {"echo": {"limit": {"context": 128_000, "output": 4096}}},
            }
        },
        "title": False,  # a title would cost a model call of its own per session
    }


def write_config(directory: Path, base_url: str) -> Path:
    path = directory / "agentforge.json"
    path.write_text(json.dumps(demo_config(base_url), indent=2))
    os.chmod(path, 0o600)
    return path


async def serve(directory: Path) -> None:
    async with EchoingFakeOpenAI() as fake:
        path = write_config(directory, fake.base_url)
        print(f"demo provider at {fake.base_url}; config written to {path}")
        print(f"in another terminal: agentforge serve --config {path}", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dir", type=Path, help="where to write agentforge.json (default: a new temporary directory)"
    )
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="agentforge-demo-"))
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it ends
        asyncio.run(serve(directory))


if __name__ == "__main__":
    main()
