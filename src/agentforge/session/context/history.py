"""Effective history: `filter_compacted` (KERNEL 6.4) and conversion to model messages (6.5).

A loop step converts its whole history: each message's conversion is kept while the message object
lives (llm/kept.py), so an unchanged message is converted once, not once per step (~2 us a message:
a 450-message session spent ~0.9 ms of the event loop per step on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentforge.llm.kept import Kept
from agentforge.llm.messages import (
    AssistantModelMessage,
    FileContent,
    ModelMessage,
    ReasoningContent,
    TextContent,
    ToolCallContent,
    ToolModelMessage,
    ToolResultContent,
    UserModelMessage,
)
from agentforge.model.errors import MessageAbortedError
from agentforge.model.message import AssistantMessage, UserMessage, WithParts
from agentforge.model.part import (
    CompactionPart,
    FilePart,
    ReasoningPart,
    StepStartPart,
    SubtaskPart,
    TextPart,
    ToolPart,
    ToolStateCompleted,
    ToolStateError,
)

CLEARED_TOOL_OUTPUT = "[Old tool result content cleared]"
INTERRUPTED_TOOL_OUTPUT = "[Tool execution was interrupted]"
COMPACTION_QUESTION = "What did we do so far?"
SUBTASK_NOTE = "The following tool was executed by the user"
# Text and directory files were already expanded into synthetic text when the user sent them.
_EXPANDED_MIMES = frozenset({"text/plain", "application/x-directory"})


def filter_compacted(messages: list[WithParts]) -> list[WithParts]:
    """Drop everything before the last completed compaction (messages oldest first).

    [newer] When the compaction kept a tail verbatim (`tail_start_id`), the walk goes on back to the
    tail's first message, and the result is reordered to: compaction message, its summary, the tail,
    then whatever came after the compaction message.
    """
    completed: set[str] = set()
    kept: list[WithParts] = []
    boundary: tuple[WithParts, CompactionPart] | None = None
    for item in reversed(messages):
        if boundary is not None:
            tail_start_id = boundary[1].tail_start_id
            assert tail_start_id is not None
            if item.info.id < tail_start_id:
                break
            kept.append(item)
            continue
        kept.append(item)
        info = item.info
        if isinstance(info, AssistantMessage):
            if info.summary and info.finish and info.error is None:
                completed.add(info.parent_id)
        elif info.id in completed and (part := compaction_part(item)) is not None:
            if not part.tail_start_id or part.tail_start_id >= info.id:
                break
            boundary = (item, part)
    kept.reverse()
    if boundary is None:
        return kept
    return _with_tail_first(kept, *boundary)


def _with_tail_first(kept: list[WithParts], request: WithParts, part: CompactionPart) -> list[WithParts]:
    tail = [m for m in kept if m.info.id < request.info.id]
    if part.overflow:
        # The overflowing request was re-sent after the summary: its first attempt is not history.
        for index in range(len(tail) - 1, -1, -1):
            if isinstance(tail[index].info, UserMessage) and not is_compaction_request(tail[index]):
                tail = tail[:index]
                break
    later = [m for m in kept if m.info.id > request.info.id]
    summary = [m for m in later if _summarises(m.info, request.info.id)][:1]
    rest = [m for m in later if m not in summary]
    return [request, *summary, *tail, *rest]


def _summarises(info: UserMessage | AssistantMessage, request_id: str) -> bool:
    return (
        isinstance(info, AssistantMessage)
        and bool(info.summary)
        and info.parent_id == request_id
        and bool(info.finish)
        and info.error is None
    )


def compaction_part(item: WithParts) -> CompactionPart | None:
    return next((p for p in item.parts if isinstance(p, CompactionPart)), None)


def is_compaction_request(item: WithParts) -> bool:
    """A user message that asks for a compaction (not one the user wrote)."""
    return isinstance(item.info, UserMessage) and compaction_part(item) is not None


@dataclass(slots=True)
class Bindings:
    """What the loop needs to know about the effective history (KERNEL 4.4 step 3)."""

    last_user: UserMessage | None = None
    last_finished: AssistantMessage | None = None
    # The newest reply written for `last_user` (its parent), and its parts: what decides whether the
    # turn is over. Not the newest reply of all: a message whose id was taken before a reply's but
    # written after its step read the history is older than that reply and yet unanswered, and a
    # reply by a replica whose clock runs ahead may be newer than any written here later.
    answer: AssistantMessage | None = None
    answer_parts: list[object] = field(default_factory=list)
    tasks: list[CompactionPart | SubtaskPart] = field(default_factory=list)


def bind(messages: list[WithParts]) -> Bindings:
    """Pick each binding by maximum id; pending tasks are those newer than the last finished reply."""
    found = Bindings()
    last_user: UserMessage | None = None
    last_finished: AssistantMessage | None = None
    for item in messages:
        info = item.info
        if isinstance(info, UserMessage):
            if last_user is None or info.id > last_user.id:
                last_user = info
        elif info.finish and (last_finished is None or info.id > last_finished.id):
            last_finished = info
    found.last_user, found.last_finished = last_user, last_finished
    answer = _newest_answer(messages, last_user)
    if answer is not None:
        assert isinstance(answer.info, AssistantMessage)
        found.answer, found.answer_parts = answer.info, list(answer.parts)
    boundary = last_finished.id if last_finished else ""
    tasks = found.tasks
    for item in messages:
        if item.info.id > boundary:
            for part in item.parts:
                if isinstance(part, CompactionPart | SubtaskPart):
                    tasks.append(part)
    return found


def _newest_answer(messages: list[WithParts], user: UserMessage | None) -> WithParts | None:
    if user is None:
        return None
    newest: WithParts | None = None
    for item in messages:
        info = item.info
        answers = isinstance(info, AssistantMessage) and info.parent_id == user.id
        if answers and (newest is None or info.id > newest.info.id):
            newest = item
    return newest


def unanswered_last(messages: list[WithParts], found: Bindings) -> list[WithParts]:
    """The messages for a step answering `found.last_user`, with it last when no reply answers it
    yet: one whose id was taken before a reply's (written after that reply's step read history)
    sorts before that reply, and a request ending in an assistant message asks the model to go on
    with it (a prefill), not to answer."""
    user = found.last_user
    if user is None or found.answer is not None or not messages or messages[-1].info is user:
        return messages
    held = [item for item in messages if item.info is user]
    return [item for item in messages if item.info is not user] + held


def has_pending_tool_calls(parts: list[object]) -> bool:
    """Any tool part that is not provider-executed and not an orphaned interrupted call."""
    for part in parts:
        if not isinstance(part, ToolPart):
            continue
        if (part.metadata or {}).get("providerExecuted"):
            continue
        state = part.state
        if isinstance(state, ToolStateError) and (state.metadata or {}).get("interrupted"):
            continue
        return True
    return False


def with_queued_reminders(messages: list[WithParts], after_id: str) -> list[WithParts]:
    """Wrap user text sent while the loop was running so the model addresses it (KERNEL 4.4 step 15)."""
    result: list[WithParts] = []
    for item in messages:
        if not isinstance(item.info, UserMessage) or item.info.id <= after_id:
            result.append(item)
            continue
        parts = []
        for part in item.parts:
            if isinstance(part, TextPart) and not part.synthetic and not part.ignored and part.text.strip():
                wrapped = (
                    "<system-reminder>\nThe user sent the following message:\n"
                    f"{part.text}\n\nPlease address this message and continue with your tasks.\n"
                    "</system-reminder>"
                )
                part = part.model_copy(update={"text": wrapped})
            parts.append(part)
        result.append(WithParts(info=item.info, parts=parts))
    return result


def to_model_messages(
    messages: list[WithParts], *, strip_media: bool = False, model: tuple[str, str] | None = None
) -> list[ModelMessage]:
    """`model` is (providerID, modelID) of the coming call: provider metadata on reasoning and tool calls
    (such as signatures) is only sent back to the model that produced it.

    The messages must not be changed in place afterwards (change a copy, as with shared history):
    each one's conversion is kept while it lives, and the model messages returned are shared with
    later calls, so they are read-only too."""
    out: list[ModelMessage] = []
    converted = _converted.getter((strip_media, model))
    for item in messages:
        out.extend(converted(item))
    return out


def _convert(item: WithParts, strip_media: bool, model: tuple[str, str] | None) -> tuple[ModelMessage, ...]:
    if not item.parts:
        return ()
    if isinstance(item.info, UserMessage):
        user = _user_message(item, strip_media)
        return (user,) if user.content else ()
    if _assistant_is_sendable(item):
        return tuple(_assistant_messages(item, strip_media, model))
    return ()


# Each live message's conversion, by (strip_media, model).
_converted: Kept[WithParts, tuple[bool, tuple[str, str] | None], tuple[ModelMessage, ...]] = Kept(
    lambda item, options: _convert(item, *options)
)


def _user_message(item: WithParts, strip_media: bool) -> UserModelMessage:
    content: list[TextContent | FileContent] = []
    for part in item.parts:
        if isinstance(part, TextPart) and not part.ignored:
            content.append(TextContent(text=part.text))
        elif isinstance(part, FilePart) and part.mime not in _EXPANDED_MIMES:
            content.append(_file_content(part, strip_media))
        elif isinstance(part, CompactionPart):
            content.append(TextContent(text=COMPACTION_QUESTION))
        elif isinstance(part, SubtaskPart):
            content.append(TextContent(text=SUBTASK_NOTE))
    return UserModelMessage(content=content)


def _file_content(part: FilePart, strip_media: bool) -> TextContent | FileContent:
    if strip_media:
        return TextContent(text=f"[Attached {part.mime}: {part.filename or 'file'}]")
    return FileContent(mime=part.mime, url=part.url, filename=part.filename)


def _assistant_is_sendable(item: WithParts) -> bool:
    info = item.info
    assert isinstance(info, AssistantMessage)
    if info.error is None:
        return True
    # An aborted reply still carries what the model said and did before the abort.
    return isinstance(info.error, MessageAbortedError) and any(
        not isinstance(p, StepStartPart | ReasoningPart) for p in item.parts
    )


def _assistant_messages(
    item: WithParts, strip_media: bool, model: tuple[str, str] | None
) -> list[ModelMessage]:
    info = item.info
    assert isinstance(info, AssistantMessage)
    same_model = model is None or model == (info.provider_id, info.model_id)
    content: list[TextContent | ReasoningContent | ToolCallContent] = []
    results: list[ToolResultContent] = []
    media: list[TextContent | FileContent] = []
    for part in item.parts:
        if isinstance(part, TextPart) and not part.ignored and part.text:
            content.append(TextContent(text=part.text))
        elif isinstance(part, ReasoningPart) and part.text:
            metadata = part.metadata if same_model else None
            content.append(ReasoningContent(text=part.text, metadata=metadata))
        elif isinstance(part, ToolPart):
            metadata = part.metadata if same_model else None
            content.append(ToolCallContent(part.call_id, part.tool, part.state.input, metadata=metadata))
            result, attachments = _tool_result(part, strip_media)
            results.append(result)
            media.extend(attachments)
    if not content:
        return []
    messages: list[ModelMessage] = [AssistantModelMessage(content=content)]
    if results:
        messages.append(ToolModelMessage(content=results))
    if media:
        # Chat-style tool results carry text only: images from tools follow as a user message.
        messages.append(
            UserModelMessage(content=[TextContent(text="Attached image(s) from tool result:"), *media])
        )
    return messages


def _tool_result(
    part: ToolPart, strip_media: bool
) -> tuple[ToolResultContent, list[TextContent | FileContent]]:
    state = part.state
    if isinstance(state, ToolStateCompleted):
        if state.time.compacted:
            return ToolResultContent(part.call_id, part.tool, CLEARED_TOOL_OUTPUT), []
        files = [_file_content(a, strip_media) for a in state.attachments or []]
        return ToolResultContent(part.call_id, part.tool, state.output), files
    if isinstance(state, ToolStateError):
        output = (state.metadata or {}).get("output")
        if (state.metadata or {}).get("interrupted") and isinstance(output, str):
            return ToolResultContent(part.call_id, part.tool, output), []
        return ToolResultContent(part.call_id, part.tool, state.error, is_error=True), []
    return ToolResultContent(part.call_id, part.tool, INTERRUPTED_TOOL_OUTPUT, is_error=True), []
