"""The synchronous SDK: `AgentForge`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx2

from agentforge.client import routes
from agentforge.client.errors import AgentForgeConnectionError, AuthenticationError, error_from_response
from agentforge.client.resources import (
    Agents,
    Audit,
    Commands,
    Files,
    Instance,
    Messages,
    Permissions,
    Providers,
    Questions,
    Sessions,
    Sync,
)
from agentforge.client.routes import Call, LiveStatus, Page, PartInput
from agentforge.client.sse import ServerEvent, SSEDecoder, iter_events
from agentforge.client.typed import MAX_RECONNECTS, Reconnects, final_message, typed
from agentforge.model.event_types import EventSessionIdle, EventStreamUnauthorized, TypedEvent
from agentforge.model.message import WithParts
from agentforge.model.session import PermissionRule, Session

T = TypeVar("T")


class AgentForge:
    """A client for one Agent Forge server.

    `token` (or its alias `api_key`) is sent as `Authorization: Bearer`: an API key or a JWT; without
    either, AGENTFORGE_API_KEY is used unless a `transport` is given (an in-process app has its own
    local identity and must not receive a key meant for a remote server).
    `transport` replaces the network (e.g. `BlockingASGITransport(app)` to talk to an app in-process);
    `timeout` bounds ordinary calls, while `prompt()` and `events()` wait as long as the server works.
    """

    def __init__(
        self,
        base_url: str = routes.DEFAULT_BASE_URL,
        *,
        token: str | None = None,
        api_key: str | None = None,
        transport: httpx2.BaseTransport | None = None,
        timeout: float | httpx2.Timeout = routes.DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url
        self._timeout = httpx2.Timeout(timeout)
        self._http = httpx2.Client(
            base_url=base_url,
            transport=transport,
            timeout=self._timeout,
            headers=routes.client_headers(
                routes.resolve_token(token, api_key, from_env=transport is None), headers
            ),
        )
        # The resource namespaces, as the openai and anthropic SDKs have them (resources.py).
        self.sessions = SyncSessions(self)
        self.messages = Messages[Sync](self._execute)
        self.permissions = Permissions[Sync](self._execute)
        self.questions = Questions[Sync](self._execute)
        self.commands = Commands[Sync](self._execute)
        self.agents = Agents[Sync](self._execute)
        self.providers = Providers[Sync](self._execute)
        self.audit = Audit[Sync](self._execute)
        self.files = Files[Sync](self._execute)
        self.instance = Instance[Sync](self._execute)
        self.events = SyncEvents(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _execute(self, call: Call[T]) -> T:
        timeout = routes.without_read_timeout(self._timeout) if call.long_running else self._timeout
        try:
            response = self._http.request(
                call.method, call.path, params=call.params, json=call.json, timeout=timeout
            )
        except httpx2.TransportError as exc:
            raise AgentForgeConnectionError(f"{call.method} {self.base_url}{call.path}: {exc}") from exc
        if not response.is_success:
            raise error_from_response(response)
        return call.parse(response)

    def health(self) -> dict[str, Any]:
        return self._execute(routes.health())

    def create_session(
        self,
        title: str | None = None,
        parent_id: str | None = None,
        *,
        permission: Sequence[PermissionRule] | None = None,
    ) -> Session:
        return self._execute(routes.create_session(title, parent_id, permission))

    def list_sessions(
        self,
        *,
        directory: str | None = None,
        roots: bool | None = None,
        start: int | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        return self._execute(routes.list_sessions(directory, roots, start, search, limit))

    def get_session(self, session_id: str) -> Session:
        return self._execute(routes.get_session(session_id))

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        permission: Sequence[PermissionRule] | None = None,
    ) -> Session:
        return self._execute(routes.update_session(session_id, title, permission))

    def delete_session(self, session_id: str) -> bool:
        return self._execute(routes.delete_session(session_id))

    def status(self) -> dict[str, LiveStatus]:
        """Busy sessions only: `{sessionID: StatusBusy | StatusRetry}`."""
        return self._execute(routes.status())

    def message_pages(self, session_id: str, page_size: int = 50) -> Iterator[Page]:
        """Every page of the session's messages, newest page first (each page is oldest first)."""
        before: str | None = None
        while True:
            page = self.messages(session_id, limit=page_size, before=before)
            yield page
            if page.next_cursor is None:
                return
            before = page.next_cursor

    def message(self, session_id: str, message_id: str) -> WithParts:
        return self._execute(routes.message(session_id, message_id))

    def prompt(
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
        return self._execute(routes.prompt(session_id, body))

    def prompt_async(
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
        self._execute(routes.prompt_async(session_id, body))

    def abort(self, session_id: str) -> bool:
        return self._execute(routes.abort(session_id))

    def _raw_events(self, session_id: str | None = None, last_event_id: str | None = None) -> EventStream:
        """The live event stream, optionally of one session; use it as a context manager."""
        request = self._http.build_request(
            "GET",
            "/event",
            params=routes.events_params(session_id),
            headers=routes.events_headers(last_event_id),
            timeout=routes.without_read_timeout(self._timeout),
        )
        return EventStream(self._http, request)


class EventStream:
    """An open `GET /event`: iterate it for `ServerEvent`s; `close()` ends the iteration.

    Connecting happens on `__enter__` (or the first iteration), so `with client.events(...)` returns
    once the server has accepted the subscription. `last_event_id` is what to pass back to resume
    (the server needs the same `session_id` for that: seqs are per session).
    """

    def __init__(self, http: httpx2.Client, request: httpx2.Request) -> None:
        self._http = http
        self._request = request
        self._response: httpx2.Response | None = None
        self._decoder = SSEDecoder()
        self._events: Generator[ServerEvent, None, None] | None = None
        self._closed = False

    @property
    def last_event_id(self) -> str | None:
        return self._decoder.last_event_id

    def open(self) -> Self:
        if self._response is not None:
            return self
        try:
            response = self._http.send(self._request, stream=True)
        except httpx2.TransportError as exc:
            raise AgentForgeConnectionError(f"GET {self._request.url}: {exc}") from exc
        if not response.is_success:
            response.read()
            response.close()
            raise error_from_response(response)
        self._response = response
        return self

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> ServerEvent:
        # One reader for the stream's life: `iter(stream)` may be taken again and resumes here.
        if self._events is None:
            self._events = self._read()
        return next(self._events)

    def _read(self) -> Generator[ServerEvent, None, None]:
        response = self.open()._response
        assert response is not None
        try:
            yield from iter_events(response.iter_bytes(), self._decoder)
        except (httpx2.StreamError, httpx2.TransportError) as exc:
            if self._closed:
                return
            raise AgentForgeConnectionError(f"event stream broke: {exc}") from exc

    def close(self) -> None:
        self._closed = True
        if self._events is not None:
            # A reader running in another thread cannot be closed from here; closing the
            # response below ends it instead.
            with contextlib.suppress(ValueError):
                self._events.close()
        if self._response is not None:
            self._response.close()


class TypedEventStream:
    """`GET /event` as typed events (agentforge.model.event_types), reconnecting after a drop: with
    Last-Event-ID when it follows one session, so the durable events missed meanwhile are replayed."""

    def __init__(self, client: AgentForge, session_id: str | None, last_event_id: str | None) -> None:
        self._client = client
        self._reconnects = Reconnects(session_id, last_event_id)
        self._raw: EventStream | None = None
        self._closed = False

    @property
    def last_event_id(self) -> str | None:
        return self._reconnects.last_event_id

    def open(self) -> EventStream:
        if self._raw is None:
            resume = self._reconnects.resume_from()
            self._raw = self._client.events(self._reconnects.session_id, resume).open()
        return self._raw

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[TypedEvent]:
        while not self._closed:
            raw = self.open()
            try:
                for event in raw:
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
            raw.close()
            self._raw = None
            time.sleep(delay)

    def close(self) -> None:
        self._closed = True
        if self._raw is not None:
            self._raw.close()


class Turn:
    """One prompt followed on the event stream: iterate it for the turn's typed events (it ends after
    `session.idle`); `message` is then the final assistant message (also the generator's return value)."""

    def __init__(self, client: AgentForge, session_id: str, body: dict[str, Any]) -> None:
        self._client = client
        self.session_id = session_id
        self._body = body
        self.message: WithParts | None = None

    def __iter__(self) -> Generator[TypedEvent, None, WithParts]:
        client, session_id = self._client, self.session_id
        with TypedEventStream(client, session_id, None) as events:  # subscribed before prompting
            client._execute(routes.prompt_async(session_id, self._body))
            for event in events:
                yield event
                if isinstance(event, EventSessionIdle):
                    break
        self.message = final_message(client._execute(routes.messages(session_id, 1, None)), session_id)
        return self.message

    def until_done(self) -> WithParts:
        """Reads the turn to its end; the final assistant message."""
        for _ in self:
            pass
        assert self.message is not None
        return self.message


class SyncSessions(Sessions[Sync]):
    def __init__(self, client: AgentForge) -> None:
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
    ) -> Turn:
        """Subscribe, prompt, and yield the turn's typed events; the final assistant message at the end."""
        body = routes.prompt_body(
            parts, model=model, agent=agent, system=system, no_reply=False, message_id=None
        )
        return Turn(self._client, session_id, body)


class SyncEvents:
    def __init__(self, client: AgentForge) -> None:
        self._client = client

    def __call__(self, session_id: str | None = None, last_event_id: str | None = None) -> EventStream:
        """The raw event stream (untyped `ServerEvent`s, no reconnecting): `forge.events(...)`."""
        return self._client._raw_events(session_id, last_event_id)

    def subscribe(
        self, session_id: str | None = None, *, last_event_id: str | None = None
    ) -> TypedEventStream:
        """Typed events of the tenant, or of one session (resumable); use it as a context manager."""
        return TypedEventStream(self._client, session_id, last_event_id)
