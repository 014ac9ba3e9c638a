"""Chunks per second through each model adapter, against its wire-level fake. Prints JSON.

For each adapter the fake streams `--chunks` text chunks; we time
- `adapter_chunks_per_s`: the whole call through `agentforge.llm.adapter.stream` (SDK transport, our
  decoding into stream events), and
- `raw_chunks_per_s`: the same request with a bare httpx2 client that only reads the body's bytes (as
every adapter does before splitting them into events; the Bedrock request is unsigned), the floor the
adapter's own cost sits on. `adapter_over_raw` is their time ratio. Each figure is the
median of `--rounds` rounds (one warm-up round first).

Usage: python bench/adapters.py [--chunks N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx2
import orjson

from agentforge.llm import anthropic_messages, azure_openai, google_gemini, openai_chat
from agentforge.llm.adapter import stream
from agentforge.llm.messages import ModelRequest, TextContent, UserModelMessage
from agentforge.llm.provider import CloudOptions, ResolvedModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.anthropic_server import AnthropicScript, FakeAnthropic
from tests.fakes.bedrock_server import FakeBedrock
from tests.fakes.gemini_server import FakeGemini, GeminiScript
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.fakes.responses_server import FakeResponses, ResponsesScript

MODEL = "bench-model"
REQUEST = ModelRequest(system=["bench"], messages=[UserModelMessage([TextContent("go")])])


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one adapter's fake listens and how to ask it for `n` chunks."""

    model: ResolvedModel
    raw_url: str
    raw_body: dict[str, Any]
    raw_headers: dict[str, str]
    enqueue: Callable[[int], None]


def resolved(api: str, base_url: str, **fields: Any) -> ResolvedModel:
    return ResolvedModel(
        provider_id="bench",
        model_id=MODEL,
        api=api,
        base_url=base_url,
        api_key="sk-bench",
        headers={},
        timeout=30.0,
        limit_context=128_000,
        limit_output=4096,
        limit_input=None,
        **fields,
    )


def chat_body() -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True}


@contextlib.asynccontextmanager
async def openai_endpoint() -> AsyncIterator[Endpoint]:
    async with FakeOpenAI() as fake:
        yield Endpoint(
            resolved("openai", fake.base_url),
            f"{fake.base_url}/chat/completions",
            chat_body(),
            {"authorization": "Bearer sk-bench"},
            lambda n: fake.enqueue(Script().text("abcd" * n).usage(10, n).finish()),
        )


@contextlib.asynccontextmanager
async def azure_endpoint() -> AsyncIterator[Endpoint]:
    async with FakeOpenAI() as fake:
        yield Endpoint(
            resolved("azure", fake.origin, api_version="2024-10-21"),
            f"{fake.origin}/openai/deployments/{MODEL}/chat/completions?api-version=2024-10-21",
            chat_body(),
            {"api-key": "sk-bench"},
            lambda n: fake.enqueue(Script().text("abcd" * n).usage(10, n).finish()),
        )


@contextlib.asynccontextmanager
async def responses_endpoint() -> AsyncIterator[Endpoint]:
    async with FakeResponses() as fake:
        yield Endpoint(
            resolved("openai-responses", fake.base_url),
            f"{fake.base_url}/responses",
            {"model": MODEL, "input": "go", "stream": True},
            {"authorization": "Bearer sk-bench"},
            lambda n: fake.enqueue(ResponsesScript().text("abcd" * n).with_usage(10, n)),
        )


@contextlib.asynccontextmanager
async def gemini_endpoint() -> AsyncIterator[Endpoint]:
    async with FakeGemini() as fake:
        yield Endpoint(
            resolved("google", fake.base_url),
            f"{fake.base_url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
            {"contents": [{"role": "user", "parts": [{"text": "go"}]}]},
            {"x-goog-api-key": "sk-bench"},
            lambda n: fake.enqueue(GeminiScript().text("abcd" * n).with_usage(10, n)),
        )


@contextlib.asynccontextmanager
async def anthropic_endpoint() -> AsyncIterator[Endpoint]:
    async with FakeAnthropic() as fake:
        yield Endpoint(
            resolved("anthropic", fake.base_url),
            f"{fake.base_url}/messages",
            {
                "model": MODEL,
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": "go"}],
                "stream": True,
            },
            {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"},
            lambda n: fake.enqueue(AnthropicScript().text("abcd" * n).usage(10, n)),
        )


@contextlib.asynccontextmanager
async def bedrock_endpoint() -> AsyncIterator[Endpoint]:
    async with FakeBedrock() as fake:
        aws = CloudOptions(region="us-east-1", access_key_id="AKIDBENCH", secret_access_key="bench-secret")
        # The fake checks only that a SigV4 header is present; the raw client sends a placeholder.
        signed = {
            "authorization": "AWS4-HMAC-SHA256 Credential=AKIDBENCH/20260101/us-east-1/bedrock/aws4_request",
            "x-amz-date": "20260101T000000Z",
        }
        yield Endpoint(
            replace(resolved("anthropic-bedrock", fake.base_url, cloud=aws), api_key=""),
            f"{fake.base_url}/model/{MODEL}/invoke-with-response-stream",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": "go"}],
            },
            signed,
            lambda n: fake.enqueue(AnthropicScript().text("abcd" * n).usage(10, n)),
        )


CASES: dict[str, Callable[[], contextlib.AbstractAsyncContextManager[Endpoint]]] = {
    "openai": openai_endpoint,
    "azure": azure_endpoint,
    "openai-responses": responses_endpoint,
    "google": gemini_endpoint,
    "anthropic": anthropic_endpoint,
    "anthropic-bedrock": bedrock_endpoint,
}


async def time_adapter(endpoint: Endpoint, chunks: int) -> float:
    endpoint.enqueue(chunks)
    started = time.perf_counter()
    events = stream(endpoint.model, REQUEST)
    try:
        async for _ in events:
            pass
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    return time.perf_counter() - started


async def time_raw(client: httpx2.AsyncClient, endpoint: Endpoint, chunks: int) -> float:
    endpoint.enqueue(chunks)
    started = time.perf_counter()
    async with client.stream(
        "POST", endpoint.raw_url, json=endpoint.raw_body, headers=endpoint.raw_headers
    ) as r:
        r.raise_for_status()
        async for _ in r.aiter_bytes():
            pass
    return time.perf_counter() - started


async def run_case(name: str, chunks: int, rounds: int) -> dict[str, Any]:
    async with CASES[name]() as endpoint, httpx2.AsyncClient(timeout=30) as client:
        await time_adapter(endpoint, chunks)  # warm-up: connection pool, imports, first-call caches
        await time_raw(client, endpoint, chunks)
        adapter = statistics.median([await time_adapter(endpoint, chunks) for _ in range(rounds)])
        raw = statistics.median([await time_raw(client, endpoint, chunks) for _ in range(rounds)])
    return {
        "adapter_chunks_per_s": round(chunks / adapter),
        "raw_chunks_per_s": round(chunks / raw),
        "adapter_over_raw": round(adapter / raw, 2),
    }


async def close_clients() -> None:
    await openai_chat.close_clients()
    await azure_openai.close_clients()
    await google_gemini.close_clients()
    await anthropic_messages.close_clients()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"chunks": args.chunks, "rounds": args.rounds}
    try:
        for name in CASES:
            results[name] = await run_case(name, args.chunks, args.rounds)
    finally:
        await close_clients()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    print(orjson.dumps(asyncio.run(main(parser.parse_args())), option=orjson.OPT_INDENT_2).decode())
