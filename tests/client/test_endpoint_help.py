"""What `help()` shows for an SDK method: its own name, parameters, result and docstring."""

from __future__ import annotations

import inspect
import pydoc
from collections.abc import Awaitable

from agentforge.client import AgentForge, AsyncAgentForge
from agentforge.client.resources import Endpoint, Namespace
from agentforge.client.routes import Page
from agentforge.model.message import WithParts
from agentforge.model.session import Session

URL = "http://forge.test"


def test_a_sync_method_carries_its_name_signature_and_docstring() -> None:
    with AgentForge(URL) as forge:
        fork = forge.sessions.fork
        listing = forge.messages.list

    assert fork.__name__ == "fork"
    assert fork.__qualname__ == "Sessions.fork"
    assert fork.__doc__ is not None and "history up to" in fork.__doc__
    assert list(inspect.signature(fork).parameters) == ["session_id", "message_id"]
    assert inspect.signature(fork).return_annotation is Session
    signature = inspect.signature(listing)
    assert signature.parameters["limit"].kind is inspect.Parameter.KEYWORD_ONLY
    assert signature.return_annotation is Page


async def test_an_async_method_returns_an_awaitable_of_what_the_sync_one_returns() -> None:
    async with AsyncAgentForge(URL) as forge:
        create = forge.messages.create

    assert create.__name__ == "create"
    assert inspect.signature(create).return_annotation == Awaitable[WithParts]
    assert list(inspect.signature(create).parameters)[:2] == ["session_id", "parts"]


def test_help_text_names_the_method_not_the_wrapper() -> None:
    with AgentForge(URL) as forge:
        text = pydoc.plain(pydoc.render_doc(forge.sessions.summarize))

    assert "summarize(session_id: str, model: str, *, auto: bool = False) -> bool" in text
    assert "Compact the history" in text
    assert "run(" not in text and "*args" not in text


def test_every_method_of_every_namespace_says_what_it_does() -> None:
    with AgentForge(URL) as forge:
        namespaces = [value for value in vars(forge).values() if isinstance(value, Namespace)]
        undocumented = [
            f"{type(namespace).__name__}.{name}"
            for namespace in namespaces
            for name in dir(namespace)
            if isinstance(inspect.getattr_static(namespace, name), Endpoint)
            and not (getattr(namespace, name).__doc__ or "").strip()
        ]

    assert len(namespaces) >= 10
    assert undocumented == []
