"""How `ForgeServer` serves: the HTTP parser and event loop it names (server/serve.py)."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from agentforge.server.serve import ForgeServer


def test_requests_are_parsed_by_httptools_on_asyncio() -> None:
    """httptools' C parser, never h11's pure-Python one that uvicorn's "auto" falls back to when
    httptools is missing (it cost ~3% of a plain turn's instructions); the loop is asyncio's
    whatever else is installed ("auto" would take uvloop, under which commands' stdout is a socket
    and their spawn closes no inherited descriptors: bench/README.md, fourteenth round)."""
    config = ForgeServer(FastAPI(), host="127.0.0.1", port=0).config
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("asyncio.")
    finally:
        loop.close()
    assert isinstance(loop, asyncio.AbstractEventLoop)
