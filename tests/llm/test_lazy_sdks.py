"""Provider SDKs (and the MCP SDK, and the libraries only some features need) are imported when first
used, not by starting the server or the CLI."""

from __future__ import annotations

import asyncio
import json
import sys

from agentforge.config.sections import PROVIDER_APIS
from agentforge.llm import anthropic_messages
from agentforge.llm.adapter import ADAPTER_MODULES, load_adapter

SDKS = ("anthropic", "openai", "google.genai", "mcp", "mcp_types")
# Snapshots, web pages, MCP/structured-output schemas, migrations (a database at head needs none),
# Postgres, audit checkpoint keys and JWTs, YAML front matter, and what only benchmarks and tests use.
FEATURE_LIBRARIES = (
    *("pygit2", "bs4", "markdownify", "jsonschema", "alembic", "asyncpg", "cryptography", "jwt", "yaml"),
    *("matplotlib", "schemathesis", "hypothesis", "psycopg"),
)
# What only the other commands or the first command a tool checks need: `serve` goes without them
# (the HTTP client; the doctor's checks; the bash grammar).
SERVE_DEFERRED = ("agentforge.client", "agentforge.doctor", "tree_sitter", "tree_sitter_bash")
PROBE = (
    "import json, sys; import agentforge.cli.main, agentforge.cli.serve, agentforge.server.app; "
    f"print(json.dumps([name for name in {(*SDKS, *FEATURE_LIBRARIES, *SERVE_DEFERRED)!r} "
    "if name in sys.modules]))"
)


async def test_starting_the_server_or_the_cli_imports_no_provider_sdk_nor_feature_library() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROBE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, err.decode()
    assert json.loads(out) == []


async def test_every_api_has_an_adapter_that_streams() -> None:
    assert set(anthropic_messages.ANTHROPIC_APIS) <= set(ADAPTER_MODULES)
    # The config accepts exactly the apis there is an adapter for.
    assert set(ADAPTER_MODULES) == set(PROVIDER_APIS)
    for module in set(ADAPTER_MODULES.values()):
        adapter = await load_adapter(module)
        assert callable(adapter.stream)


# A plain OpenAI chat turn, then a failed one, in a fresh process: what it had imported after each.
OPENAI_TURN_PROBE = """
import asyncio, json, sys
from agentforge.llm.errors import to_named_error
from tests.fakes.openai_server import FakeOpenAI, Script, reply
from tests.llm.streaming import collect, failure, model_for

async def main():
    async with FakeOpenAI() as fake:
        fake.enqueue(reply("hi"), Script().error_status(503, {"error": {"message": "busy"}}))
        text = "".join(getattr(event, "text", "") for event in await collect(model_for(fake)))
        after_turn = "openai" in sys.modules
        error = await failure(model_for(fake))
        named = to_named_error(error, provider_id="fake")
        return [text, after_turn, type(error).__name__, named.data.status_code, named.data.is_retryable]

print(json.dumps(asyncio.run(main())))
"""


async def test_an_openai_chat_turn_imports_the_sdk_only_for_a_failure() -> None:
    """The request goes out without the SDK (its import is ~0.4 s of a first turn); an error response
    is still the SDK's own error, mapped as before."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        OPENAI_TURN_PROBE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, err.decode()
    assert json.loads(out) == ["hi", False, "InternalServerError", 503, True]
