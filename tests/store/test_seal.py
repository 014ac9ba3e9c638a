"""Sealed cluster notifications (store/seal.py): only a holder of the key can write one a replica
takes, none is taken twice or late, and a channel's payloads mean nothing on another."""

from __future__ import annotations

import base64

from agentforge.store.seal import CLOCK_SLACK_MS, FRESHNESS_MS, STALE_GAP_EVERY_MS, Seal

SECRET = "ab" * 32
CHANNEL = "agentforge_test"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> int:
        return self.ms


def _pair(clock: Clock | None = None) -> tuple[Seal, Seal]:
    clock = clock or Clock()
    return Seal(SECRET, CHANNEL, now_ms=clock), Seal(SECRET, CHANNEL, now_ms=clock)


def test_a_sealed_payload_opens_on_another_replica_once() -> None:
    sender, receiver = _pair()
    sealed = sender.seal('{"k": "abort", "s": "ses_1"}')
    assert '"abort"' not in sealed and "ses_1" not in sealed  # nothing readable on the channel
    assert receiver.open(sealed) == '{"k": "abort", "s": "ses_1"}'
    assert receiver.open(sealed) is None  # replayed
    assert receiver.refused == 1
    later = sender.seal("next")
    assert receiver.open(later) == "next"


def test_payloads_out_of_order_from_one_sender_are_refused() -> None:
    sender, receiver = _pair()
    first, second = sender.seal("1"), sender.seal("2")
    assert receiver.open(second) == "2"
    assert receiver.open(first) is None


def test_plain_tampered_and_foreign_payloads_are_refused() -> None:
    sender, receiver = _pair()
    sealed = sender.seal("payload")
    raw = bytearray(base64.b64decode(sealed))
    raw[-1] ^= 1
    other_key = Seal("cd" * 32, CHANNEL).seal("payload")
    other_channel = Seal(SECRET, "agentforge_other").seal("payload")
    for forged in (
        '{"r": "x", "k": "abort", "s": "ses_1"}',
        base64.b64encode(bytes(raw)).decode(),
        other_key,
        other_channel,
        "",
    ):
        assert receiver.open(forged) is None
    assert receiver.refused == 5
    assert receiver.open(sealed) == "payload"  # the genuine one still opens


def test_stale_payloads_and_ones_sealed_before_the_receiver_listened_are_refused() -> None:
    clock = Clock()
    sender = Seal(SECRET, CHANNEL, now_ms=clock)
    old = sender.seal("before")
    clock.ms += CLOCK_SLACK_MS + 1
    receiver = Seal(SECRET, CHANNEL, now_ms=clock)
    assert receiver.open(old) is None  # sealed before it listened: it cannot know whether it is new
    fresh = sender.seal("after")
    clock.ms += FRESHNESS_MS + 1
    assert receiver.open(fresh) is None  # too old by now
    assert receiver.open(sender.seal("now")) == "now"


def test_a_replica_drops_its_own_payloads() -> None:
    sender, _receiver = _pair()
    assert sender.open(sender.seal("mine")) is None
    assert sender.refused == 0


def test_payloads_sealed_while_the_receiver_did_not_listen_are_refused_after() -> None:
    clock = Clock()
    sender, receiver = _pair(clock)
    assert receiver.open(sender.seal("heard")) == "heard"
    during_the_gap = sender.seal("missed")  # a role that can LISTEN may have kept it
    clock.ms += CLOCK_SLACK_MS + 1
    receiver.listening_again()
    assert receiver.open(during_the_gap) is None  # resynced from the log, never replayed
    assert receiver.open(sender.seal("after")) == "after"


def test_a_payload_a_sender_sealed_and_never_sent_is_a_gap_at_its_next_one() -> None:
    sender, receiver = _pair()
    assert receiver.open(sender.seal("1")) == "1"
    sender.seal("2")  # its NOTIFY failed: nobody heard it
    assert receiver.open(sender.seal("3")) == "3"  # still taken, and the loss is known
    assert receiver.gaps == 1
    assert receiver.open(sender.seal("4")) == "4"
    assert receiver.gaps == 1


def test_a_genuine_payload_refused_as_stale_is_a_gap_once() -> None:
    clock = Clock()
    sender, receiver = _pair(clock)
    assert receiver.open(sender.seal("1")) == "1"
    late = sender.seal("2")
    clock.ms += FRESHNESS_MS + 1
    assert receiver.open(late) is None
    assert (receiver.refused, receiver.gaps) == (1, 1)
    assert receiver.open(sender.seal("3")) == "3"  # its successor is not a second gap
    assert receiver.gaps == 1


def test_a_sender_with_a_skewed_clock_is_a_gap_at_most_every_interval() -> None:
    # Every payload of a sender whose clock is minutes ahead arrives "stale": a gap each time
    # would cut off every subscriber on each of its notifications.
    clock, skewed = Clock(), Clock()
    receiver = Seal(SECRET, CHANNEL, now_ms=clock)
    sender = Seal(SECRET, CHANNEL, now_ms=skewed)
    skewed.ms += 5 * FRESHNESS_MS
    for _ in range(10):
        assert receiver.open(sender.seal("late")) is None
        clock.ms += 100
        skewed.ms += 100
    assert (receiver.refused, receiver.gaps) == (10, 1)
    clock.ms += STALE_GAP_EVERY_MS
    skewed.ms += STALE_GAP_EVERY_MS
    assert receiver.open(sender.seal("late")) is None
    assert receiver.gaps == 2


def test_replays_and_what_was_sealed_before_listening_are_no_gap() -> None:
    clock = Clock()
    sender = Seal(SECRET, CHANNEL, now_ms=clock)
    before = sender.seal("before")
    clock.ms += CLOCK_SLACK_MS + 1
    receiver = Seal(SECRET, CHANNEL, now_ms=clock)
    assert receiver.open(before) is None  # it was not listening: nothing it should have had
    taken = sender.seal("taken")
    assert receiver.open(taken) == "taken"  # a new sender's first counter is no jump either
    clock.ms += FRESHNESS_MS + 1
    assert receiver.open(taken) is None  # replayed late: refused, and no gap
    assert (receiver.refused, receiver.gaps) == (2, 0)


def test_the_counters_jumping_over_a_listening_gap_are_no_second_gap() -> None:
    clock = Clock()
    sender, receiver = _pair(clock)
    assert receiver.open(sender.seal("heard")) == "heard"
    sender.seal("missed")  # said while the receiver did not listen: it resyncs for that already
    clock.ms += CLOCK_SLACK_MS + 1
    receiver.listening_again()
    assert receiver.open(sender.seal("after")) == "after"
    assert receiver.gaps == 0
    sender.seal("lost")
    assert receiver.open(sender.seal("next")) == "next"  # excused once, not for good
    assert receiver.gaps == 1
