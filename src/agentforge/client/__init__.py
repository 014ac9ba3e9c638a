"""The Python SDK for Agent Forge: sync and async clients, the event stream, in-process transports.

```python
from agentforge.client import AgentForge

with AgentForge("http://127.0.0.1:4096") as forge:
    session = forge.create_session(title="demo")
    with forge.events(session.id) as events:  # subscribe before prompting
        forge.prompt_async(session.id, "hello")
        for event in events:
            if event.type == "message.part.delta":
                print(event.properties["delta"], end="")
            elif event.type == "session.idle":
                break
```
"""

from agentforge.client.aio import AsyncAgentForge, AsyncEventStream
from agentforge.client.blocking import BlockingASGITransport
from agentforge.client.errors import AgentForgeConnectionError, AgentForgeError, EventStreamError
from agentforge.client.routes import Page, file_part, parse_model, text_part
from agentforge.client.sse import ServerEvent
from agentforge.client.sync import AgentForge, EventStream
from agentforge.client.transport import LifespanError, StreamingASGITransport

__all__ = [
    "AgentForge",
    "AgentForgeConnectionError",
    "AgentForgeError",
    "AsyncAgentForge",
    "AsyncEventStream",
    "BlockingASGITransport",
    "EventStream",
    "EventStreamError",
    "LifespanError",
    "Page",
    "ServerEvent",
    "StreamingASGITransport",
    "file_part",
    "parse_model",
    "text_part",
]
