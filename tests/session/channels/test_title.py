"""Title generation rules (KERNEL 4.6): which sessions qualify, and how the model's answer is cleaned."""

from __future__ import annotations

from agentforge.config import Config
from agentforge.model.session import Session, SessionTime
from agentforge.session.channels.title import clean_title, is_default_title, should_generate, source_text
from tests.session.builders import Conversation, subtask, text

DEFAULT = "New session - 2025-01-02T03:04:05.678Z"


def _session(title: str = DEFAULT, parent_id: str | None = None) -> Session:
    return Session(
        id="ses_x", slug="calm-river", directory="/w", parent_id=parent_id, title=title, version="0",
        time=SessionTime(created=1, updated=1),
    )  # fmt: skip


def test_only_the_generated_defaults_count_as_default_titles() -> None:
    assert is_default_title(DEFAULT)
    assert is_default_title("Child session - 2025-01-02T03:04:05.678Z")
    assert not is_default_title("New session - today")
    assert not is_default_title(DEFAULT + " (fork #1)")


def test_clean_title_strips_thinking_and_takes_the_first_line() -> None:
    assert (
        clean_title("<think>\nlet me see\n</think>\n\n  Fix the flaky test  \nextra") == "Fix the flaky test"
    )
    assert clean_title("\n\n") == ""
    long = "x" * 150
    assert clean_title(long) == "x" * 97 + "..."
    assert len(clean_title("y" * 100)) == 100


def test_a_root_session_with_one_real_message_qualifies() -> None:
    chat = Conversation()
    chat.user("hello", text("expanded file", synthetic=True))
    config = Config()
    assert should_generate(config, _session(), chat.messages)
    assert not should_generate(config, _session(title="Mine"), chat.messages)
    assert not should_generate(config, _session(parent_id="ses_parent"), chat.messages)
    assert not should_generate(Config.model_validate({"title": False}), _session(), chat.messages)
    # Synthetic-only user messages are not "real"; a second real one ends the chance.
    chat.assistant("hi")
    chat.user(text("reminder", synthetic=True))
    assert should_generate(config, _session(), chat.messages)
    chat.user("second")
    assert not should_generate(config, _session(), chat.messages)


def test_source_is_the_users_own_words_or_the_subtask_prompts() -> None:
    chat = Conversation()
    words = chat.user("fix the bug", text("file dump", synthetic=True), text("hidden", ignored=True))
    assert source_text(words) == "fix the bug"
    tasks = chat.user(subtask("explore the repo"), subtask("list the tests"))
    assert source_text(tasks) == "explore the repo\nlist the tests"
