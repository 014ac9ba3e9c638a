"""The streaming ASGI transports, against small Starlette apps (so each behaviour is isolated)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from agentforge.client import BlockingASGITransport, LifespanError, StreamingASGITransport

BUFFER = 4


@dataclass
class Probe:
    """What the app saw; the test reads it."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    stream_started: threading.Event = field(default_factory=threading.Event)
    stream_ended: threading.Event = field(default_factory=threading.Event)
    stream_cancelled: bool = False
    chunks_sent: int = 0
    lifecycle: list[str] = field(default_factory=list)


def make_app(probe: Probe, *, fail_startup: bool = False) -> Starlette:
    async def gated(_request: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield b"first\n"
            await probe.gate.wait()
            yield b"second\n"

        return StreamingResponse(body())

    async def endless(_request: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            probe.stream_started.set()
            try:
                while True:
                    yield b"data: tick\n\n"
                    await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                probe.stream_cancelled = True
                raise
            finally:
                probe.stream_ended.set()

        return StreamingResponse(body(), media_type="text/event-stream")

    async def many(request: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for index in range(int(request.query_params["count"])):
                probe.chunks_sent += 1
                yield b"%d," % index

        return StreamingResponse(body())

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"body": (await request.body()).decode(), "query": str(request.query_params)})

    async def state(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.state.greeting)

    async def boom(_request: Request) -> Response:
        raise RuntimeError("boom before answering")

    async def broken_stream(_request: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield b"partial"
            raise RuntimeError("boom mid-body")

        return StreamingResponse(body())

    async def hang(_request: Request) -> Response:
        probe.stream_started.set()
        try:
            await asyncio.Event().wait()
        finally:
            probe.stream_ended.set()
        return Response()

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[dict[str, Any]]:
        probe.lifecycle.append("startup")
        if fail_startup:
            raise RuntimeError("no database")
        yield {"greeting": "hello from lifespan"}
        probe.lifecycle.append("shutdown")

    routes = [
        Route("/gated", gated),
        Route("/endless", endless),
        Route("/many", many),
        Route("/echo", echo, methods=["POST"]),
        Route("/state", state),
        Route("/boom", boom),
        Route("/broken", broken_stream),
        Route("/hang", hang),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


async def test_body_chunks_arrive_before_the_app_finishes() -> None:
    probe = Probe()
    transport = StreamingASGITransport(make_app(probe))
    async with (
        httpx2.AsyncClient(transport=transport, base_url="http://app") as client,
        client.stream("GET", "/gated") as response,
    ):
        chunks = response.aiter_bytes()
        assert await asyncio.wait_for(anext(chunks), 2) == b"first\n"
        assert not probe.gate.is_set()  # the app is still blocked: the first chunk was streamed
        probe.gate.set()
        assert await asyncio.wait_for(anext(chunks), 2) == b"second\n"


@pytest.mark.parametrize("count", [BUFFER, 3 * BUFFER])
async def test_a_slow_reader_holds_the_app_back_and_still_gets_the_whole_body(count: int) -> None:
    # With `count == BUFFER` the final send finds the buffer full: the end of the body must still
    # reach the reader although Starlette stops the response as soon as it is complete.
    probe = Probe()
    transport = StreamingASGITransport(make_app(probe), body_buffer_chunks=BUFFER)
    async with (
        httpx2.AsyncClient(transport=transport, base_url="http://app") as client,
        client.stream("GET", f"/many?count={count}") as response,
    ):
        await asyncio.sleep(0.05)  # the app runs ahead as far as the buffer lets it
        assert probe.chunks_sent <= BUFFER + 1
        body = await asyncio.wait_for(response.aread(), 2)
    assert body == b"".join(b"%d," % index for index in range(count))


async def test_closing_the_response_disconnects_and_stops_the_handler() -> None:
    probe = Probe()
    transport = StreamingASGITransport(make_app(probe))
    async with httpx2.AsyncClient(transport=transport, base_url="http://app") as client:
        async with client.stream("GET", "/endless") as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "data: tick"
        # Leaving the block closed the response; the handler's generator was torn down.
        assert probe.stream_ended.is_set()
        assert probe.stream_cancelled


async def test_a_handler_that_ignores_disconnect_is_cancelled_after_the_grace() -> None:
    ended = asyncio.Event()

    async def deaf_app(scope: Any, receive: Any, send: Any) -> None:
        # Never calls receive(): only cancellation can stop it.
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x", "more_body": True})
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    transport = StreamingASGITransport(deaf_app, disconnect_grace=0.01)
    async with httpx2.AsyncClient(transport=transport, base_url="http://app") as client:
        async with client.stream("GET", "/") as response:
            assert await anext(response.aiter_bytes()) == b"x"
        assert ended.is_set()


async def test_cancelling_a_pending_request_cancels_the_handler() -> None:
    probe = Probe()
    transport = StreamingASGITransport(make_app(probe))
    async with httpx2.AsyncClient(transport=transport, base_url="http://app") as client:
        task = asyncio.create_task(client.get("/hang"))
        assert await asyncio.to_thread(probe.stream_started.wait, 2)  # the handler is running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(probe.stream_ended.wait, 2)


async def test_request_body_and_query_reach_the_app() -> None:
    transport = StreamingASGITransport(make_app(Probe()))
    async with httpx2.AsyncClient(transport=transport, base_url="http://app") as client:
        response = await client.post("/echo?a=1", content=b"payload")
    assert response.json() == {"body": "payload", "query": "a=1"}


async def test_lifespan_runs_startup_and_shutdown_and_shares_its_state() -> None:
    probe = Probe()
    transport = StreamingASGITransport(make_app(probe))
    async with transport.lifespan(), httpx2.AsyncClient(transport=transport, base_url="http://app") as client:
        assert probe.lifecycle == ["startup"]
        assert (await client.get("/state")).text == "hello from lifespan"
    assert probe.lifecycle == ["startup", "shutdown"]


async def test_failed_startup_raises_lifespan_error() -> None:
    transport = StreamingASGITransport(make_app(Probe(), fail_startup=True))
    with pytest.raises(LifespanError, match="no database"):
        async with transport.lifespan():
            pass


async def test_app_errors_are_raised_or_answered_as_500() -> None:
    raising = StreamingASGITransport(make_app(Probe()))
    async with httpx2.AsyncClient(transport=raising, base_url="http://app") as client:
        with pytest.raises(RuntimeError, match="boom before answering"):
            await client.get("/boom")
    quiet = StreamingASGITransport(make_app(Probe()), raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=quiet, base_url="http://app") as client:
        assert (await client.get("/boom")).status_code == 500


async def test_an_error_mid_body_breaks_the_stream() -> None:
    raising = StreamingASGITransport(make_app(Probe()))
    async with httpx2.AsyncClient(transport=raising, base_url="http://app") as client:
        with pytest.raises(RuntimeError, match="boom mid-body"):
            await client.get("/broken")
    quiet = StreamingASGITransport(make_app(Probe()), raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=quiet, base_url="http://app") as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            await client.get("/broken")


def test_blocking_transport_streams_to_sync_code_and_runs_the_lifespan() -> None:
    probe = Probe()
    transport = BlockingASGITransport(make_app(probe))
    with httpx2.Client(transport=transport, base_url="http://app") as client:
        assert client.get("/state").text == "hello from lifespan"
        with client.stream("GET", "/endless") as response:
            assert next(response.iter_lines()) == "data: tick"
            assert probe.stream_started.is_set()
        assert probe.stream_ended.wait(2)
        assert probe.lifecycle == ["startup"]
    assert probe.lifecycle == ["startup", "shutdown"]


def test_blocking_transport_reports_failed_startup() -> None:
    transport = BlockingASGITransport(make_app(Probe(), fail_startup=True))
    with pytest.raises(LifespanError), httpx2.Client(transport=transport, base_url="http://app") as client:
        client.get("/state")
    assert not transport.running
