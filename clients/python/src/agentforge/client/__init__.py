"""The Python SDK for Agent Forge: sync and async clients, the event stream, in-process transports.

```python
from agentforge.client import AgentForge
from agentforge.model.event_types import EventMessagePartDelta

with AgentForge("http://127.0.0.1:4096") as forge:
    session = forge.sessions.create(title="demo")
    turn = forge.sessions.stream(session.id, "hello")  # subscribes, prompts, yields typed events
    for event in turn:
        if isinstance(event, EventMessagePartDelta):
            print(event.properties.delta, end="")
    print(turn.message)  # the final assistant message
```

Resource namespaces (resources.py, one definition for both clients): `sessions`, `messages`,
`permissions`, `questions`, `commands`, `agents`, `providers`, `audit`, `files`, `instance`, `events`.
Errors by kind: BadRequestError, AuthenticationError, PermissionDeniedError, NotFoundError,
ConflictError, RequestTooLargeError, InternalServerError, APIConnectionError (all AgentForgeError).
"""

from agentforge.client.aio import AsyncAgentForge, AsyncEventStream, AsyncTurn, AsyncTypedEventStream
from agentforge.client.blocking import BlockingASGITransport
from agentforge.client.errors import (
    AgentForgeConnectionError,
    AgentForgeError,
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    EventStreamError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RequestTooLargeError,
)
from agentforge.client.routes import Page, file_part, parse_model, text_part
from agentforge.client.sse import ServerEvent
from agentforge.client.sync import AgentForge, EventStream, Turn, TypedEventStream
from agentforge.client.transport import LifespanError, StreamingASGITransport

__all__ = [
    "APIConnectionError",
    "AgentForge",
    "AgentForgeConnectionError",
    "AgentForgeError",
    "AsyncAgentForge",
    "AsyncEventStream",
    "AsyncTurn",
    "AsyncTypedEventStream",
    "AuthenticationError",
    "BadRequestError",
    "BlockingASGITransport",
    "ConflictError",
    "EventStream",
    "EventStreamError",
    "InternalServerError",
    "LifespanError",
    "NotFoundError",
    "Page",
    "PermissionDeniedError",
    "RequestTooLargeError",
    "ServerEvent",
    "StreamingASGITransport",
    "Turn",
    "TypedEventStream",
    "file_part",
    "parse_model",
    "text_part",
]
