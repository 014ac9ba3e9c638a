"""The replicas' inbox: bounded, and when full the tenant holding most of it loses its own first."""

from __future__ import annotations

from typing import Any

from agentforge.runtime.inbox import ANSWERED, ASKED, NOTED, URGENT, Inbox


def _message(n: int) -> dict[str, Any]:
    return {"n": n}


async def test_it_hands_notifications_out_in_the_order_heard() -> None:
    inbox = Inbox(3)
    for n, tenants in enumerate((frozenset({"a"}), None, frozenset({"b"}))):
        assert inbox.put(_message(n), tenants) is None
    assert [(await inbox.get())["n"] for _ in range(3)] == [0, 1, 2]
    assert len(inbox) == 0


async def test_a_full_inbox_drops_the_oldest_of_the_tenant_holding_most_of_it() -> None:
    inbox = Inbox(4)
    inbox.put(_message(0), frozenset({"quiet"}))  # the oldest, of a tenant with one notification
    inbox.put(_message(1), None)  # a command
    inbox.put(_message(2), frozenset({"loud"}))
    inbox.put(_message(3), frozenset({"loud"}))
    assert inbox.put(_message(4), frozenset({"loud"})) == _message(2)
    assert inbox.put(_message(5), frozenset({"loud"})) == _message(3)
    assert [(await inbox.get())["n"] for _ in range(4)] == [0, 1, 4, 5]


async def test_it_prefers_a_notification_of_the_heaviest_tenant_alone_to_a_shared_one() -> None:
    inbox = Inbox(3)
    inbox.put(_message(0), frozenset({"loud", "quiet"}))
    inbox.put(_message(1), frozenset({"loud"}))
    inbox.put(_message(2), frozenset({"loud"}))
    assert inbox.put(_message(3), frozenset({"quiet"})) == _message(1)
    assert [(await inbox.get())["n"] for _ in range(3)] == [0, 2, 3]
    # None of the heaviest tenant's alone: its oldest shared one goes.
    inbox = Inbox(2)
    inbox.put(_message(0), frozenset({"loud", "quiet"}))
    inbox.put(_message(1), frozenset({"loud", "other"}))
    assert inbox.put(_message(2), frozenset({"quiet"})) == _message(0)
    assert [(await inbox.get())["n"] for _ in range(2)] == [1, 2]


async def test_commands_are_kept_while_anything_else_can_go() -> None:
    inbox = Inbox(3)
    inbox.put(_message(0), None)
    inbox.put(_message(1), frozenset())  # feeds nobody's stream (a question's answer)
    inbox.put(_message(2), None)
    assert inbox.put(_message(3), None) == _message(1)
    assert inbox.put(_message(4), None) == _message(0)  # commands only: the oldest goes
    assert [(await inbox.get())["n"] for _ in range(3)] == [2, 3, 4]


async def test_a_full_inbox_of_commands_drops_the_least_important_and_keeps_an_abort() -> None:
    inbox = Inbox(3)
    inbox.put(_message(0), None, URGENT)  # the oldest of all: an abort
    inbox.put(_message(1), None, ANSWERED)
    inbox.put(_message(2), None, NOTED)
    assert inbox.put(_message(3), None, ASKED) == _message(2)
    assert inbox.put(_message(4), None, ANSWERED) == _message(3)
    assert inbox.put(_message(5), None, ANSWERED) == _message(1)  # the oldest of the least
    # The abort is handed out first, then the rest in the order heard.
    assert [(await inbox.get())["n"] for _ in range(3)] == [0, 4, 5]


async def test_aborts_jump_the_queue_and_go_only_when_there_is_nothing_else() -> None:
    inbox = Inbox(2)
    inbox.put(_message(0), frozenset({"a"}))
    inbox.put(_message(1), None, URGENT)
    assert inbox.put(_message(2), None, URGENT) == _message(0)
    assert inbox.put(_message(3), None, URGENT) == _message(1)  # aborts only: the oldest goes
    assert [(await inbox.get())["n"] for _ in range(2)] == [2, 3]
    assert len(inbox) == 0
