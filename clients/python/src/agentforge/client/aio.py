"""The asynchronous SDK: `AsyncAgentForge` (same methods as `AgentForge`, awaited)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx2

from agentforge.client import routes
from agentforge.client.errors import AgentForgeConnectionError, AuthenticationError, error_from_response
from agentforge.client.resources import (
    Agents,
    Async,
    Audit,
    Commands,
    Files,
    Instance,
    Messages,
    Permissions,
    Providers,
    Questions,
    Sessions,
)
from agentforge.client.routes import Call, LiveStatus, Page, PartInput
from agentforge.client.sse import ServerEvent, SSEDecoder, aiter_events
from agentforge.client.typed import MAX_RECONNECTS, Reconnects, final_message, typed
from agentforge.model.event_types import EventSessionIdle, EventStreamUnauthorized, TypedEvent
from agentforge.model.message import WithParts
from agentforge.model.session import PermissionRule, Session

T = TypeVar("T")


class AsyncAgentForge:
    """A client for one Agent Forge server.

    `token` (or its alias `api_key`) is sent as `Authorization: Bearer`: an API key or a JWT; without
    either, AGENTFORGE_API_KEY is used unless a `transport` is given (an in-process app has its own
    local identity and must not receive a key meant for a remote server).
    `transport` replaces the network (e.g. `StreamingASGITransport(app)` to talk to an app in-process);
    `timeout` bounds ordinary calls, while `prompt()` and `events()` wait as long as the server works.
    """

    def __init__(
        self,
        base_url: str = routes.DEFAULT_BASE_URL,
        *,
        token: str | None = None,
        api_key: str | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: float | httpx2.Timeout = routes.DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url
        self._timeout = httpx2.Timeout(timeout)
        self._http = httpx2.AsyncClient(
            base_url=base_url,
            transport=transport,
            timeout=self._timeout,
            headers=routes.client_headers(
                routes.resolve_token(token, api_key, from_env=transport is None), headers
            ),
        )
        # The resource namespaces, as the openai and anthropic SDKs have them (resources.py).
        self.sessions = AsyncSessions(self)
        self.messages = Messages[Async](self._execute)
        self.permissions = Permissions[Async](self._execute)
        self.questions = Questions[Async](self._execute)
        self.commands = Commands[Async](self._execute)
        self.agents = Agents[Async](self._execute)
        self.providers = Providers[Async](self._execute)
        self.audit = Audit[Async](self._execute)
        self.files = Files[Async](self._execute)
        self.instance = Instance[Async](self._execute)
        self.events = AsyncEvents(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _execute(self, call: Call[T]) -> T:
        timeout = routes.without_read_timeout(self._timeout) if call.long_running else self._timeout
        try:
            response = await self._http.request(
                call.method, call.path, params=call.params, json=call.json, timeout=timeout
            )
        except httpx2.TransportError as exc:
            raise AgentForgeConnectionError(f"{call.method} {self.base_url}{call.path}: {exc}") from exc
        if not response.is_success:
            raise error_from_response(response)
        return call.parse(response)

    async def health(self) -> dict[str, Any]:
        return await self._execute(routes.health())

    async def create_session(
        self,
        title: str | None = None,
        parent_id: str | None = None,
        *,
        permission: Sequence[PermissionRule] | None = None,
    ) -> Session:
        return await self._execute(routes.create_session(title, parent_id, permission))

    async def list_sessions(
        self,
        *,
        directory: str | None = None,
        roots: bool | None = None,
        start: int | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        return await self._execute(routes.list_sessions(directory, roots, start, search, limit))

    async def get_session(self, session_id: str) -> Session:
        return await self._execute(routes.get_session(session_id))

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        permission: Sequence[PermissionRule] | None = None,
    ) -> Session:
        return await self._execute(routes.update_session(session_id, title, permission))

    async def delete_session(self, session_id: str) -> bool:
        return await self._execute(routes.delete_session(session_id))

    async def status(self) -> dict[str, LiveStatus]:
        """Busy sessions only: `{sessionID: StatusBusy | StatusRetry}`."""
        return await self._execute(routes.status())

    async def message_pages(self, session_id: str, page_size: int = 50) -> AsyncIterator[Page]:
        """Every page of the session's messages, newest page first (each page is oldest first)."""
        before: str | None = None
        while True:
            page = await self.messages(session_id, limit=page_size, before=before)
            yield page
            if page.next_cursor is None:
                return
            before = page.next_cursor

    async def message(self, session_id: str, message_id: str) -> WithParts:
        return await self._execute(routes.message(session_id, message_id))

    async def prompt(
        self,
        session_id: str,
        parts: str | Sequence[PartInput],
        *,
        model: str | None = None,
        agent: str | None = None,
        system: str | None = None,
        no_reply: bool = False,
        message_id: str | None = None,
    ) -> WithParts:
        """Runs one turn and returns the final assistant message (the user message with `no_reply`)."""
        body = routes.prompt_body(
            parts, model=model, agent=agent, system=system, no_reply=no_reply, message_id=message_id
        )
        return await self._execute(routes.prompt(session_id, body))

    async def prompt_async(
        self,
        session_id: str,
        parts: str | Sequence[PartInput],
        *,
        model: str | None = None,
        agent: str | None = None,
        system: str | None = None,
        message_id: str | None = None,
    ) -> None:
        """Starts a turn and returns at once; follow it with `events()`."""
        body = routes.prompt_body(
            parts, model=model, agent=agent, system=system, no_reply=False, message_id=message_id
        )
        await self._execute(routes.prompt_async(session_id, body))

    async def abort(self, session_id: str) -> bool:
        return await self._execute(routes.abort(session_id))

    def _raw_events(
        self, session_id: str | None = None, last_event_id: str | None = None
    ) -> AsyncEventStream:
        """The live event stream, optionally of one session; use it as a context manager."""
        request = self._http.build_request(
            "GET",
            "/event",
            params=routes.events_params(session_id),
            headers=routes.events_headers(last_event_id),
            timeout=routes.without_read_timeout(self._timeout),
        )
        return AsyncEventStream(self._http, request)


class AsyncEventStream:
    """An open `GET /event`: iterate it (`async for`) for `ServerEvent`s; `aclose()` ends the iteration.

    Connecting happens on `__aenter__` (or the first iteration), so `async with client.events(...)`
    returns once the server has accepted the subscription. `last_event_id` is what to pass back to
    resume (with the same `session_id`: seqs are per session). Use it as a context manager: breaking
    out of `async for` alone does not close it.
    """

    def __init__(self, http: httpx2.AsyncClient, request: httpx2.Request) -> None:
        self._http = http
        self._request = request
        self._response: httpx2.Response | None = None
        self._decoder = SSEDecoder()
        self._events: AsyncGenerator[ServerEvent, None] | None = None
        self._closed = False

    @property
    def last_event_id(self) -> str | None:
        return self._decoder.last_event_id

    async def open(self) -> Self:
        if self._response is not None:
            return self
        try:
            response = await self._http.send(self._request, stream=True)
        except httpx2.TransportError as exc:
            raise AgentForgeConnectionError(f"GET {self._request.url}: {exc}") from exc
        if not response.is_success:
            await response.aread()
            await response.aclose()
            raise error_from_response(response)
        self._response = response
        return self

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ServerEvent:
        # One reader for the stream's life: `aiter(stream)` may be taken again and resumes here.
        if self._events is None:
            self._events = self._read()
        return await anext(self._events)

    async def _read(self) -> AsyncGenerator[ServerEvent, None]:
        response = (await self.open())._response
        assert response is not None
        try:
            async for event in aiter_events(response.aiter_bytes(), self._decoder):
                yield event
        except (httpx2.StreamError, httpx2.TransportError) as exc:
            if self._closed:
                return
            raise AgentForgeConnectionError(f"event stream broke: {exc}") from exc

    async def aclose(self) -> None:
        self._closed = True
        if self._events is not None:
            # A reader suspended in another task cannot be closed from here; closing the
            # response below ends it instead.
            with contextlib.suppress(RuntimeError):
                await self._events.aclose()
        if self._response is not None:
            await self._response.aclose()


class AsyncTypedEventStream:
    """`GET /event` as typed events (agentforge.model.event_types), reconnecting after a drop: with
    Last-Event-ID when it follows one session, so the durable events missed meanwhile are replayed."""

    def __init__(self, client: AsyncAgentForge, session_id: str | None, last_event_id: str | None) -> None:
        self._client = client
        self._reconnects = Reconnects(session_id, last_event_id)
        self._raw: AsyncEventStream | None = None
        self._closed = False

    @property
    def last_event_id(self) -> str | None:
        return self._reconnects.last_event_id

    async def open(self) -> AsyncEventStream:
        if self._raw is None:
            resume = self._reconnects.resume_from()
            self._raw = await self._client._raw_events(self._reconnects.session_id, resume).open()
        return self._raw

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def __aiter__(self) -> AsyncIterator[TypedEvent]:
        while not self._closed:
            raw = await self.open()
            try:
                async for event in raw:
                    self._reconnects.seen(raw.last_event_id)
                    model = typed(event)
                    if isinstance(model, EventStreamUnauthorized):
                        raise AuthenticationError(
                            401, "Unauthorized", model.properties.message or "credential lapsed"
                        )
                    if model is not None:
                        yield model
            except AgentForgeConnectionError:
                if self._closed:
                    return
                if self._reconnects.attempts >= MAX_RECONNECTS:
                    raise
            # The stream ended or broke without our closing it: connect again (resuming).
            delay = self._reconnects.next_delay()
            if self._closed:
                return
            if delay is None:
                raise AgentForgeConnectionError(f"event stream ended {MAX_RECONNECTS} times in a row")
            await raw.aclose()
            self._raw = None
            await asyncio.sleep(delay)

    async def aclose(self) -> None:
        self._closed = True
        if self._raw is not None:
            await self._raw.aclose()


class AsyncTurn:
    """One prompt followed on the event stream: `async for` its typed events (it ends after
    `session.idle`); `message` is then the final assistant message (`until_done()` returns it)."""

    def __init__(self, client: AsyncAgentForge, session_id: str, body: dict[str, Any]) -> None:
        self._client = client
        self.session_id = session_id
        self._body = body
        self.message: WithParts | None = None

    async def __aiter__(self) -> AsyncIterator[TypedEvent]:
        client, session_id = self._client, self.session_id
        async with AsyncTypedEventStream(client, session_id, None) as events:  # subscribed before prompting
            await client._execute(routes.prompt_async(session_id, self._body))
            async for event in events:
                yield event
                if isinstance(event, EventSessionIdle):
                    break
        page = await client._execute(routes.messages(session_id, 1, None))
        self.message = final_message(page, session_id)

    async def until_done(self) -> WithParts:
        """Reads the turn to its end; the final assistant message."""
        async for _ in self:
            pass
        assert self.message is not None
        return self.message


class AsyncSessions(Sessions[Async]):
    def __init__(self, client: AsyncAgentForge) -> None:
        super().__init__(client._execute)
        self._client = client

    def stream(
        self,
        session_id: str,
        parts: str | Sequence[PartInput],
        *,
        model: str | None = None,
        agent: str | None = None,
        system: str | None = None,
    ) -> AsyncTurn:
        """Subscribe, prompt, and yield the turn's typed events; the final assistant message at the end."""
        body = routes.prompt_body(
            parts, model=model, agent=agent, system=system, no_reply=False, message_id=None
        )
        return AsyncTurn(self._client, session_id, body)


class AsyncEvents:
    def __init__(self, client: AsyncAgentForge) -> None:
        self._client = client

    def __call__(self, session_id: str | None = None, last_event_id: str | None = None) -> AsyncEventStream:
        """The raw event stream (untyped `ServerEvent`s, no reconnecting): `forge.events(...)`."""
        return self._client._raw_events(session_id, last_event_id)

    def subscribe(
        self, session_id: str | None = None, *, last_event_id: str | None = None
    ) -> AsyncTypedEventStream:
        """Typed events of the tenant, or of one session (resumable); use it as a context manager."""
        return AsyncTypedEventStream(self._client, session_id, last_event_id)
