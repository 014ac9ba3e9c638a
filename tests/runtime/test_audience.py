"""Whether a replica announces its events: on until a count finds it alone with no greeting since."""

from __future__ import annotations

from agentforge.runtime.audience import Audience


def test_announcing_until_a_count_finds_this_replica_alone() -> None:
    audience = Audience()
    assert audience.others  # unknown: announce
    token = audience.counting()
    audience.counted(token, live=2)
    assert audience.others
    audience.counted(audience.counting(), live=1)
    assert not audience.others


def test_a_greeting_heard_during_a_count_keeps_announcing() -> None:
    audience = Audience()
    token = audience.counting()
    audience.greeted()  # a newcomer greeted while the count (taken before it joined) was out
    audience.counted(token, live=1)
    assert audience.others
    # A count begun after the greeting includes the newcomer; one that finds it gone stops.
    audience.counted(audience.counting(), live=1)
    assert not audience.others


def test_a_greeting_turns_announcing_back_on() -> None:
    audience = Audience()
    audience.counted(audience.counting(), live=1)
    audience.greeted()
    assert audience.others
