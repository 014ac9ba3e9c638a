"""Fork helpers: the title rule (KERNEL 3.1) and how messages are copied."""

from __future__ import annotations

from agentforge.model.message import AssistantMessage
from agentforge.model.part import CompactionPart, ToolPart, ToolStateCompleted
from agentforge.session.channels.fork import copy_messages, fork_title
from tests.session.builders import Conversation, compaction, file, text, tool_completed


def test_fork_title_counts_up() -> None:
    assert fork_title("Plan") == "Plan (fork #1)"
    assert fork_title("Plan (fork #1)") == "Plan (fork #2)"
    assert fork_title("Plan (fork #9) (fork #41)") == "Plan (fork #9) (fork #42)"
    assert fork_title("Plan (fork #x)") == "Plan (fork #x) (fork #1)"


def test_copies_remap_parents_compaction_tails_and_attachment_ids() -> None:
    chat = Conversation()
    first = chat.user("look at the image")
    image = file("image/png", "data:image/png;base64,AA==")
    chat.assistant(tool_completed("read", {"filePath": "a.png"}, "image", attachments=[image]))
    tail = chat.user("keep this")
    chat.assistant("kept")
    marker = chat.user(compaction(auto=True))
    marker.parts[0] = marker.parts[0].model_copy(update={"tail_start_id": tail.info.id})
    later = chat.user("after")

    copies = copy_messages(chat.messages, "ses_fork", before=later.info.id)

    assert len(copies) == 5
    old_to_new = {old.info.id: new.info.id for old, new in zip(chat.messages, copies, strict=False)}
    assert [c.info.id for c in copies] == sorted(c.info.id for c in copies)
    assert all(c.info.session_id == "ses_fork" for c in copies)
    reply = copies[1].info
    assert isinstance(reply, AssistantMessage) and reply.parent_id == old_to_new[first.info.id]
    tool = copies[1].parts[0]
    assert isinstance(tool, ToolPart) and isinstance(tool.state, ToolStateCompleted)
    [attached] = tool.state.attachments or []
    assert attached.id != image.id and attached.message_id == copies[1].info.id
    marker_copy = copies[4].parts[0]
    assert isinstance(marker_copy, CompactionPart) and marker_copy.tail_start_id == old_to_new[tail.info.id]
    # The source is untouched.
    assert chat.messages[1].parts[0].session_id == chat.session_id


def test_replies_still_being_written_are_left_out() -> None:
    chat = Conversation()
    chat.user("question")
    open_reply = chat.assistant(text("partial"), finish=None)
    assert isinstance(open_reply.info, AssistantMessage)
    open_reply.info.time.completed = None

    copies = copy_messages(chat.messages, "ses_fork")

    assert [type(c.info).__name__ for c in copies] == ["UserMessage"]
