"""Typed events: one model per event type the server publishes, and their discriminated union.

The server documents `GET /event` with `ServerEvent` (the OpenAPI event schema) and its tests check
every event a turn publishes against it; the SDK parses the stream into the same models. Properties
the server adds later are kept (`extra="allow"`), so an older client still reads a newer server.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, TypeAdapter

from agentforge.model.base import Wire
from agentforge.model.message import Message
from agentforge.model.part import Part
from agentforge.model.permission import (
    PermissionDecision,
    PermissionReply,
    PermissionRequestInfo,
    PermissionStatus,
)
from agentforge.model.session import Session, SessionStatus


class Properties(Wire):
    model_config = ConfigDict(extra="allow")


class SessionInfoProperties(Properties):
    session_id: str = Field(alias="sessionID")
    info: Session


class MessageUpdatedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    info: Message


class MessageRemovedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    message_id: str = Field(alias="messageID")


class PartUpdatedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    part: Part
    time: int | None = None


class PartRemovedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    message_id: str = Field(alias="messageID")
    part_id: str = Field(alias="partID")


class PartDeltaProperties(Properties):
    session_id: str = Field(alias="sessionID")
    message_id: str = Field(alias="messageID")
    part_id: str = Field(alias="partID")
    field: str
    delta: str


class PermissionRepliedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    request_id: str = Field(alias="requestID")
    reply: PermissionReply | None = None
    status: PermissionStatus
    decision: PermissionDecision | None = None
    decided_by: str | None = Field(default=None, alias="decidedBy")
    time: int
    message: str | None = None


class Todo(Properties):
    content: str
    status: str
    priority: str | None = None
    id: str | None = None


class TodoUpdatedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    todos: list[Todo]


class SessionStatusProperties(Properties):
    session_id: str = Field(alias="sessionID")
    status: SessionStatus


class SessionRef(Properties):
    session_id: str = Field(alias="sessionID")


class SessionErrorProperties(Properties):
    session_id: str | None = Field(default=None, alias="sessionID")
    error: dict[str, Any]


class Empty(Properties):
    pass


class StreamNotice(Properties):
    message: str | None = None


class StreamResetProperties(Properties):
    """The resume point is one the log no longer holds (`pruned`) or never held (`ahead`): refetch
    the state, then continue from `position`."""

    position: int
    reason: Literal["pruned", "ahead"]
    session_id: str | None = Field(default=None, alias="sessionID")


class CommandExecutedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    name: str
    arguments: str
    message_id: str = Field(alias="messageID")


class QuestionOption(Properties):
    label: str
    description: str | None = None


class Question(Properties):
    question: str
    header: str | None = None
    options: list[QuestionOption] = Field(default_factory=list)
    multiple: bool | None = None
    custom: bool | None = None


class QuestionToolRef(Properties):
    message_id: str = Field(alias="messageID")
    call_id: str = Field(alias="callID")


class QuestionRequest(Properties):
    """A question waiting for an answer, as `question.asked` and `GET /question` show it."""

    id: str
    session_id: str = Field(alias="sessionID")
    questions: list[Question]
    tool: QuestionToolRef | None = None


class QuestionRepliedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    request_id: str = Field(alias="requestID")
    answers: list[list[str]]


class QuestionRejectedProperties(Properties):
    session_id: str = Field(alias="sessionID")
    request_id: str = Field(alias="requestID")


class PtyInfoProperties(Properties):
    info: dict[str, Any]


class PtyExitedProperties(Properties):
    id: str
    exit_code: int | None = Field(default=None, alias="exitCode")


class PtyDeletedProperties(Properties):
    id: str


class EventBase(Wire):
    id: str


# One class per type. Their names are the OpenAPI schema names the generated clients use: keep them.
class EventSessionCreated(EventBase):
    type: Literal["session.created"]
    properties: SessionInfoProperties


class EventSessionUpdated(EventBase):
    type: Literal["session.updated"]
    properties: SessionInfoProperties


class EventSessionDeleted(EventBase):
    type: Literal["session.deleted"]
    properties: SessionInfoProperties


class EventMessageUpdated(EventBase):
    type: Literal["message.updated"]
    properties: MessageUpdatedProperties


class EventMessageRemoved(EventBase):
    type: Literal["message.removed"]
    properties: MessageRemovedProperties


class EventMessagePartUpdated(EventBase):
    type: Literal["message.part.updated"]
    properties: PartUpdatedProperties


class EventMessagePartRemoved(EventBase):
    type: Literal["message.part.removed"]
    properties: PartRemovedProperties


class EventMessagePartDelta(EventBase):
    type: Literal["message.part.delta"]
    properties: PartDeltaProperties


class EventPermissionAsked(EventBase):
    type: Literal["permission.asked"]
    properties: PermissionRequestInfo


class EventPermissionReplied(EventBase):
    type: Literal["permission.replied"]
    properties: PermissionRepliedProperties


class EventTodoUpdated(EventBase):
    type: Literal["todo.updated"]
    properties: TodoUpdatedProperties


class EventSessionStatus(EventBase):
    type: Literal["session.status"]
    properties: SessionStatusProperties


class EventSessionIdle(EventBase):
    type: Literal["session.idle"]
    properties: SessionRef


class EventSessionError(EventBase):
    type: Literal["session.error"]
    properties: SessionErrorProperties


class EventSessionCompacted(EventBase):
    type: Literal["session.compacted"]
    properties: SessionRef


class EventCommandExecuted(EventBase):
    type: Literal["command.executed"]
    properties: CommandExecutedProperties


class EventQuestionAsked(EventBase):
    type: Literal["question.asked"]
    properties: QuestionRequest


class EventQuestionReplied(EventBase):
    type: Literal["question.replied"]
    properties: QuestionRepliedProperties


class EventQuestionRejected(EventBase):
    type: Literal["question.rejected"]
    properties: QuestionRejectedProperties


class EventPtyCreated(EventBase):
    type: Literal["pty.created"]
    properties: PtyInfoProperties


class EventPtyUpdated(EventBase):
    type: Literal["pty.updated"]
    properties: PtyInfoProperties


class EventPtyExited(EventBase):
    type: Literal["pty.exited"]
    properties: PtyExitedProperties


class EventPtyDeleted(EventBase):
    type: Literal["pty.deleted"]
    properties: PtyDeletedProperties


class EventServerConnected(EventBase):
    type: Literal["server.connected"]
    properties: Empty


class EventServerHeartbeat(EventBase):
    type: Literal["server.heartbeat"]
    properties: Empty


class EventStreamLagged(EventBase):
    type: Literal["stream.lagged"]
    properties: StreamNotice


class EventStreamUnauthorized(EventBase):
    type: Literal["stream.unauthorized"]
    properties: StreamNotice


class EventStreamReset(EventBase):
    type: Literal["stream.reset"]
    properties: StreamResetProperties


class EventServerShutdown(EventBase):
    type: Literal["server.shutdown"]
    properties: StreamNotice


TypedEvent = (
    EventSessionCreated
    | EventSessionUpdated
    | EventSessionDeleted
    | EventMessageUpdated
    | EventMessageRemoved
    | EventMessagePartUpdated
    | EventMessagePartRemoved
    | EventMessagePartDelta
    | EventPermissionAsked
    | EventPermissionReplied
    | EventTodoUpdated
    | EventSessionStatus
    | EventSessionIdle
    | EventSessionError
    | EventSessionCompacted
    | EventCommandExecuted
    | EventQuestionAsked
    | EventQuestionReplied
    | EventQuestionRejected
    | EventPtyCreated
    | EventPtyUpdated
    | EventPtyExited
    | EventPtyDeleted
    | EventServerConnected
    | EventServerHeartbeat
    | EventStreamLagged
    | EventStreamUnauthorized
    | EventStreamReset
    | EventServerShutdown
)
ServerEvent = Annotated[TypedEvent, Field(discriminator="type")]

EVENT_ADAPTER: TypeAdapter[TypedEvent] = TypeAdapter(ServerEvent)

# Every event type a model is defined for (the server's own constants must all be here).
EVENT_TYPES: frozenset[str] = frozenset(
    get_args(model.model_fields["type"].annotation)[0] for model in get_args(TypedEvent)
)


def parse_event(envelope: dict[str, Any]) -> TypedEvent:
    """The typed model of one `{id, type, properties}` envelope; a ValidationError when it is not one."""
    return EVENT_ADAPTER.validate_python(envelope)
