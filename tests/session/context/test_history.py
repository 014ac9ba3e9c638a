"""Effective history (KERNEL 6.4), loop bindings (4.4) and conversion to model messages (6.5)."""

from __future__ import annotations

from agentforge.llm.messages import (
    AssistantModelMessage,
    FileContent,
    ReasoningContent,
    TextContent,
    ToolCallContent,
    ToolModelMessage,
    ToolResultContent,
    UserModelMessage,
)
from agentforge.model.errors import aborted_error, api_error
from agentforge.model.message import WithParts
from agentforge.model.part import CompactionPart, SubtaskPart, TextPart
from agentforge.session.context.history import (
    CLEARED_TOOL_OUTPUT,
    COMPACTION_QUESTION,
    INTERRUPTED_TOOL_OUTPUT,
    SUBTASK_NOTE,
    bind,
    filter_compacted,
    has_pending_tool_calls,
    to_model_messages,
    unanswered_last,
    with_queued_reminders,
)
from tests.session.builders import (
    Conversation,
    compaction,
    file,
    reasoning,
    step_start,
    subtask,
    text,
    tool_completed,
    tool_error,
    tool_pending,
    tool_running,
)

PNG = "data:image/png;base64,iVBORw0KGgo="


def _ids(messages: list[WithParts]) -> list[str]:
    return [m.info.id for m in messages]


# -- filter_compacted ---------------------------------------------------------------------------------


def _compacted_conversation(
    *, summary_finish: str | None = "stop", summary_error: bool = False
) -> tuple[Conversation, WithParts, WithParts]:
    chat = Conversation()
    chat.user("first question")
    chat.assistant("first answer")
    request = chat.user(compaction(auto=True))
    summary = chat.assistant(
        "We discussed the first question.",
        parent=request,
        summary=True,
        finish=summary_finish,
        error=api_error("boom") if summary_error else None,
    )
    chat.user("second question")
    chat.assistant("second answer")
    return chat, request, summary


def test_completed_compaction_hides_everything_before_it() -> None:
    chat, request, _ = _compacted_conversation()
    effective = filter_compacted(chat.messages)
    assert _ids(effective) == _ids(chat.messages[2:])
    assert effective[0].info.id == request.info.id


def test_failed_compaction_hides_nothing() -> None:
    chat, _, _ = _compacted_conversation(summary_error=True)
    assert _ids(filter_compacted(chat.messages)) == _ids(chat.messages)


def test_unfinished_compaction_hides_nothing() -> None:
    chat, _, _ = _compacted_conversation(summary_finish=None)
    assert _ids(filter_compacted(chat.messages)) == _ids(chat.messages)


def test_summary_whose_parent_has_no_compaction_part_hides_nothing() -> None:
    chat = Conversation()
    chat.user("old")
    plain = chat.user("not a compaction request")
    chat.assistant("summary-looking reply", parent=plain, summary=True)
    assert _ids(filter_compacted(chat.messages)) == _ids(chat.messages)


def test_only_the_last_completed_compaction_counts() -> None:
    chat, _, _ = _compacted_conversation()
    second_request = chat.user(compaction())
    chat.assistant("Summary of everything.", parent=second_request, summary=True)
    chat.user("third question")
    effective = filter_compacted(chat.messages)
    assert effective[0].info.id == second_request.info.id
    assert len(effective) == 3


def test_history_without_compaction_is_unchanged() -> None:
    chat = Conversation()
    chat.user("a")
    chat.assistant("b")
    chat.user("c")
    assert _ids(filter_compacted(chat.messages)) == _ids(chat.messages)
    assert filter_compacted([]) == []


# -- bind -----------------------------------------------------------------------------------------------


def test_bind_picks_the_newest_user_its_newest_answer_and_the_finished_reply() -> None:
    chat = Conversation()
    chat.user("one")
    chat.assistant("done", finish="stop")
    user = chat.user("two")
    finished = chat.assistant(step_start(), "first step", finish="tool-calls")
    running = chat.assistant(step_start(), "partial", finish=None)

    # Order of the input does not matter: bindings are chosen by maximum id.
    found = bind(list(reversed(chat.messages)))
    assert found.last_user is not None and found.last_user.id == user.info.id
    assert found.answer is not None and found.answer.id == running.info.id
    assert found.last_finished is not None and found.last_finished.id == finished.info.id
    assert found.answer_parts == list(running.parts)


def test_a_reply_for_an_older_message_is_no_answer_and_the_unanswered_one_goes_last() -> None:
    """A message whose id was taken before the reply's, written after that reply's step read the
    history: it sorts before the reply, is not answered by it, and is sent last."""
    chat = Conversation()
    first = chat.user("one")
    late = chat.user("two")
    reply = chat.assistant("answer to one", finish="stop", parent=first)
    messages = [first, late, reply]

    found = bind(messages)
    assert found.last_user is late.info and found.answer is None
    assert [item.info.id for item in unanswered_last(messages, found)] == [
        first.info.id,
        reply.info.id,
        late.info.id,
    ]
    answered = [*messages, chat.assistant("answer to two", finish="stop", parent=late)]
    found = bind(answered)
    assert found.answer is not None and found.answer.parent_id == late.info.id
    assert unanswered_last(answered, found) == answered


def test_the_answer_is_found_by_parent_whatever_a_clock_ahead_gave_another_reply() -> None:
    chat = Conversation()
    chat.user("one")
    ahead = chat.assistant("from a replica whose clock runs ahead", finish="stop")
    ahead.info = ahead.info.model_copy(update={"id": "msg_" + "z" * 26})
    user = chat.user("two")
    answer = chat.assistant("answer to two", finish="stop")

    found = bind(chat.messages)
    assert found.last_user is user.info
    assert found.answer is answer.info


def test_bind_tasks_are_those_newer_than_the_last_finished_reply() -> None:
    chat = Conversation()
    chat.user(subtask("already handled"))
    chat.assistant("handled", finish="stop")
    chat.user("plain text", subtask("pending one"))
    chat.user(compaction(auto=True))
    found = bind(chat.messages)
    assert [type(t) for t in found.tasks] == [SubtaskPart, CompactionPart]
    assert isinstance(found.tasks[0], SubtaskPart) and found.tasks[0].prompt == "pending one"


def test_bind_without_a_finished_reply_collects_every_task() -> None:
    chat = Conversation()
    chat.user(subtask("first"))
    chat.assistant("still going", finish=None)
    chat.user(compaction())
    found = bind(chat.messages)
    assert found.last_finished is None
    assert [type(t) for t in found.tasks] == [SubtaskPart, CompactionPart]


def test_bind_of_empty_history_finds_nothing() -> None:
    found = bind([])
    assert found.last_user is None and found.answer is None and found.last_finished is None
    assert found.tasks == [] and found.answer_parts == []


# -- has_pending_tool_calls -------------------------------------------------------------------------------


def test_any_ordinary_tool_part_is_pending_work() -> None:
    assert not has_pending_tool_calls([])
    assert not has_pending_tool_calls([step_start(), text("hi"), reasoning("hmm")])
    assert has_pending_tool_calls([text("hi"), tool_completed("read", {"filePath": "a"}, "x")])
    assert has_pending_tool_calls([tool_error("read", {}, "failed")])
    assert has_pending_tool_calls([tool_pending("read")])


def test_interrupted_and_provider_executed_calls_are_not_pending() -> None:
    interrupted = tool_error("bash", {"command": "sleep 9"}, "aborted", metadata={"interrupted": True})
    provider = tool_completed("web", {}, "found").model_copy(update={"metadata": {"providerExecuted": True}})
    assert not has_pending_tool_calls([interrupted])
    assert not has_pending_tool_calls([provider, interrupted, text("ok")])
    assert has_pending_tool_calls([interrupted, tool_completed("read", {}, "x")])


# -- with_queued_reminders --------------------------------------------------------------------------------


def test_queued_user_text_is_wrapped_in_a_reminder() -> None:
    chat = Conversation()
    chat.user("original request")
    finished = chat.assistant("working", finish="stop")
    queued = chat.user(
        "also do this",
        text("synthetic file body", synthetic=True),
        text("ignored note", ignored=True),
        text("   "),
    )
    result = with_queued_reminders(chat.messages, finished.info.id)

    assert result[0] == chat.messages[0] and result[1] == chat.messages[1]
    parts = result[2].parts
    assert all(isinstance(p, TextPart) for p in parts)
    wrapped = [p.text for p in parts if isinstance(p, TextPart)]
    assert wrapped[0] == (
        "<system-reminder>\nThe user sent the following message:\nalso do this\n\n"
        "Please address this message and continue with your tasks.\n</system-reminder>"
    )
    assert wrapped[1:] == ["synthetic file body", "ignored note", "   "]
    # In memory only: the stored message is untouched.
    assert isinstance(queued.parts[0], TextPart) and queued.parts[0].text == "also do this"


def test_messages_up_to_the_boundary_are_not_wrapped() -> None:
    chat = Conversation()
    first = chat.user("first")
    chat.assistant("reply")
    result = with_queued_reminders(chat.messages, first.info.id)
    assert result == chat.messages


# -- to_model_messages: user side ----------------------------------------------------------------------


def test_user_parts_become_model_content() -> None:
    chat = Conversation()
    chat.user(
        "hello",
        text("hidden", ignored=True),
        text("Called the Read tool", synthetic=True),
        file("text/plain", "file:///w/notes.txt", "notes.txt"),
        file("application/x-directory", "file:///w/src", "src"),
        file("image/png", PNG, "pic.png"),
        compaction(),
        subtask(),
    )
    assert to_model_messages(chat.messages) == [
        UserModelMessage(
            content=[
                TextContent("hello"),
                TextContent("Called the Read tool"),
                FileContent(mime="image/png", url=PNG, filename="pic.png"),
                TextContent(COMPACTION_QUESTION),
                TextContent(SUBTASK_NOTE),
            ]
        )
    ]


def test_strip_media_replaces_files_with_a_note() -> None:
    chat = Conversation()
    chat.user("look", file("image/png", PNG, "pic.png"), file("application/pdf", "data:application/pdf,x"))
    assert to_model_messages(chat.messages, strip_media=True) == [
        UserModelMessage(
            content=[
                TextContent("look"),
                TextContent("[Attached image/png: pic.png]"),
                TextContent("[Attached application/pdf: file]"),
            ]
        )
    ]


def test_messages_without_sendable_content_are_skipped() -> None:
    chat = Conversation()
    chat.user()
    chat.user(text("only ignored", ignored=True))
    chat.assistant(step_start())
    chat.assistant()
    assert to_model_messages(chat.messages) == []


def test_each_message_is_converted_once_while_it_lives() -> None:
    chat = Conversation()
    chat.user("hi")
    chat.assistant(step_start(), "Hello!")
    first = to_model_messages(chat.messages, model=("fake", "test-model"))
    again = to_model_messages(chat.messages, model=("fake", "test-model"))
    assert again == first and all(kept is made for kept, made in zip(again, first, strict=True))
    # A changed message is a new object (shared history is changed by copying): converted anew.
    changed = chat.messages[0].model_copy(update={"parts": [text("bye")]})
    assert to_model_messages([changed, chat.messages[1]])[0] == UserModelMessage(content=[TextContent("bye")])


# -- to_model_messages: assistant side -------------------------------------------------------------------


def test_assistant_text_and_reasoning_are_sent() -> None:
    chat = Conversation()
    chat.user("hi")
    thought = reasoning("thinking").model_copy(update={"metadata": {"signature": "abc"}})
    chat.assistant(step_start(), thought, text(""), text("draft", ignored=True), "Hello!")
    assert to_model_messages(chat.messages)[1:] == [
        AssistantModelMessage(
            content=[ReasoningContent("thinking", metadata={"signature": "abc"}), TextContent("Hello!")]
        )
    ]


def test_reasoning_metadata_goes_back_only_to_the_model_that_wrote_it() -> None:
    chat = Conversation()
    chat.user("hi")
    thought = reasoning("thinking").model_copy(update={"metadata": {"signature": "abc"}})
    chat.assistant(thought, "Hello!")
    same = to_model_messages(chat.messages, model=("fake", "test-model"))[1]
    other = to_model_messages(chat.messages, model=("other", "model"))[1]
    assert isinstance(same, AssistantModelMessage) and isinstance(other, AssistantModelMessage)
    assert same.content[0] == ReasoningContent("thinking", metadata={"signature": "abc"})
    assert other.content[0] == ReasoningContent("thinking", metadata=None)


def test_tool_call_metadata_goes_back_only_to_the_model_that_wrote_it() -> None:
    chat = Conversation()
    chat.user("hi")
    signed = {"google": {"thoughtSignature": "c2ln"}}
    call = tool_completed("read", {"filePath": "a"}, "x", call_id="c1")
    chat.assistant(call.model_copy(update={"metadata": signed}))
    same = to_model_messages(chat.messages, model=("fake", "test-model"))[1]
    other = to_model_messages(chat.messages, model=("other", "model"))[1]
    assert isinstance(same, AssistantModelMessage) and isinstance(other, AssistantModelMessage)
    assert same.content == [ToolCallContent("c1", "read", {"filePath": "a"}, metadata=signed)]
    assert other.content == [ToolCallContent("c1", "read", {"filePath": "a"})]


def test_errored_replies_are_dropped_but_aborted_ones_with_content_are_kept() -> None:
    chat = Conversation()
    chat.user("hi")
    chat.assistant("failed halfway", finish=None, error=api_error("server exploded"))
    chat.assistant(step_start(), reasoning("only thinking"), finish=None, error=aborted_error())
    chat.assistant(step_start(), "I was saying", finish=None, error=aborted_error())
    assert to_model_messages(chat.messages)[1:] == [
        AssistantModelMessage(content=[TextContent("I was saying")])
    ]


def test_tool_states_become_matching_results() -> None:
    chat = Conversation()
    chat.user("go")
    completed = tool_completed("read", {"filePath": "a.txt"}, "1: hello")
    compacted = tool_completed("read", {"filePath": "b.txt"}, "old content", compacted=123)
    failed = tool_error("bash", {"command": "false"}, "exit status 1")
    cut_with_output = tool_error(
        "bash", {"command": "sleep"}, "aborted", metadata={"interrupted": True, "output": "partial output"}
    )
    cut_without_output = tool_error("bash", {"command": "sleep"}, "aborted", metadata={"interrupted": True})
    pending = tool_pending("write")
    running = tool_running("grep", {"pattern": "x"})
    parts = [completed, compacted, failed, cut_with_output, cut_without_output, pending, running]
    chat.assistant(*parts, finish="tool-calls")

    assistant, tool = to_model_messages(chat.messages)[1:]
    assert assistant == AssistantModelMessage(
        content=[ToolCallContent(p.call_id, p.tool, p.state.input) for p in parts]
    )
    assert tool == ToolModelMessage(
        content=[
            ToolResultContent(completed.call_id, "read", "1: hello"),
            ToolResultContent(compacted.call_id, "read", CLEARED_TOOL_OUTPUT),
            ToolResultContent(failed.call_id, "bash", "exit status 1", is_error=True),
            ToolResultContent(cut_with_output.call_id, "bash", "partial output"),
            ToolResultContent(cut_without_output.call_id, "bash", "aborted", is_error=True),
            ToolResultContent(pending.call_id, "write", INTERRUPTED_TOOL_OUTPUT, is_error=True),
            ToolResultContent(running.call_id, "grep", INTERRUPTED_TOOL_OUTPUT, is_error=True),
        ]
    )


def test_aborted_reply_with_an_unfinished_tool_call_still_gets_a_result() -> None:
    chat = Conversation()
    chat.user("go")
    pending = tool_pending("bash")
    chat.assistant(step_start(), pending, finish=None, error=aborted_error())
    assert to_model_messages(chat.messages)[1:] == [
        AssistantModelMessage(content=[ToolCallContent(pending.call_id, "bash", {})]),
        ToolModelMessage(
            content=[ToolResultContent(pending.call_id, "bash", INTERRUPTED_TOOL_OUTPUT, is_error=True)]
        ),
    ]


def test_tool_attachments_follow_as_a_user_message() -> None:
    chat = Conversation()
    chat.user("show me")
    image = file("image/png", PNG, "shot.png")
    shot = tool_completed("read", {"filePath": "shot.png"}, "Image read", attachments=[image])
    chat.assistant(shot, finish="tool-calls")

    messages = to_model_messages(chat.messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2] == ToolModelMessage(content=[ToolResultContent(shot.call_id, "read", "Image read")])
    assert messages[3] == UserModelMessage(
        content=[
            TextContent("Attached image(s) from tool result:"),
            FileContent(mime="image/png", url=PNG, filename="shot.png"),
        ]
    )

    stripped = to_model_messages(chat.messages, strip_media=True)
    assert stripped[3] == UserModelMessage(
        content=[
            TextContent("Attached image(s) from tool result:"),
            TextContent("[Attached image/png: shot.png]"),
        ]
    )


def test_compacted_tool_output_drops_its_attachments() -> None:
    chat = Conversation()
    chat.user("show me")
    image = file("image/png", PNG, "shot.png")
    chat.assistant(tool_completed("read", {}, "Image read", compacted=1, attachments=[image]))
    messages = to_model_messages(chat.messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert isinstance(messages[2], ToolModelMessage)
    assert messages[2].content[0].output == CLEARED_TOOL_OUTPUT


def test_a_whole_conversation_keeps_its_order() -> None:
    chat = Conversation()
    chat.user("write a file")
    call = tool_completed("write", {"filePath": "a.txt", "content": "x"}, "Wrote file successfully.")
    chat.assistant(step_start(), "Writing.", call, finish="tool-calls")
    chat.assistant(step_start(), "Done.")
    chat.user("thanks")
    roles = [m.role for m in to_model_messages(chat.messages)]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
