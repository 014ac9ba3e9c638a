"""Plan/build reminders: added in memory to the last user message, never to what is stored."""

from __future__ import annotations

from agentforge.model.message import WithParts
from agentforge.model.part import TextPart
from agentforge.session.context.reminders import BUILD_SWITCH, PLAN_MODE, with_reminders
from tests.session.builders import Conversation


def texts(item: WithParts) -> list[str]:
    return [p.text for p in item.parts if isinstance(p, TextPart)]


def test_plan_agent_gets_the_plan_reminder_on_the_last_user_message() -> None:
    chat = Conversation()
    chat.user("first")
    chat.assistant("ok")
    last = chat.user("plan the refactor")
    result = with_reminders(chat.messages, "plan")
    assert texts(result[-1]) == ["plan the refactor", PLAN_MODE]
    reminder = result[-1].parts[-1]
    assert isinstance(reminder, TextPart) and reminder.synthetic
    assert texts(result[0]) == ["first"]
    assert texts(last) == ["plan the refactor"], "the stored message is left alone"


def test_build_after_plan_gets_the_switch_reminder() -> None:
    chat = Conversation()
    chat.user("plan it")
    planned = chat.assistant("Here is the plan")
    planned.info.agent = "plan"
    chat.user("go ahead")
    result = with_reminders(chat.messages, "build")
    assert texts(result[-1]) == ["go ahead", BUILD_SWITCH]


def test_no_reminder_without_plan() -> None:
    chat = Conversation()
    chat.user("hello")
    chat.assistant("hi")
    chat.user("again")
    assert with_reminders(chat.messages, "build") is chat.messages
    assert with_reminders(chat.messages, "general") is chat.messages
