"""Helpers for tests that stream from the fake provider through the adapter."""

from __future__ import annotations

from typing import Any

import pytest

from agentforge.llm import events as ev
from agentforge.llm.adapter import stream
from agentforge.llm.messages import ModelRequest, TextContent, UserModelMessage
from agentforge.llm.provider import ResolvedModel
from tests.fakes.openai_server import FakeOpenAI


def model_for(fake: FakeOpenAI, model_id: str = "test-model", **fields: Any) -> ResolvedModel:
    base: dict[str, Any] = {
        "provider_id": "fake",
        "model_id": model_id,
        "api": "openai",
        "base_url": fake.base_url,
        "api_key": "sk-test",
        "headers": {},
        "timeout": 10.0,
        "limit_context": 32_000,
        "limit_output": 4096,
        "limit_input": None,
    }
    return ResolvedModel(**{**base, **fields})


def hello_request(**fields: Any) -> ModelRequest:
    return ModelRequest(system=["You are terse."], messages=[UserModelMessage([TextContent("Hi")])], **fields)


async def collect(model: ResolvedModel, request: ModelRequest | None = None) -> list[ev.StreamEvent]:
    return [event async for event in stream(model, request or hello_request())]


async def failure(model: ResolvedModel, request: ModelRequest | None = None) -> BaseException:
    with pytest.raises(Exception) as caught:
        await collect(model, request)
    return caught.value
