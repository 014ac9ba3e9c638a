"""Sealed notifications: what replicas say on their channel, readable and forgeable by them alone.

LISTEN and NOTIFY need no privilege: any role that can connect to the database can hear the channel
and speak on it. So each payload is encrypted and authenticated (AES-256-GCM) with a key derived
from `cluster_secret` (only the runtime role may read it) and the channel name (one schema's sealed
payloads mean nothing on another's channel). A payload that does not open is dropped unread.

A sealed payload could still be sent again by whoever heard it (a replay): each carries its
sender's id, a counter that sender increases with each payload, and when it was sealed. A receiver
takes a payload only when its counter is above the last it took from that sender, when it was
sealed within `FRESHNESS_MS` of the receiver's clock (replicas' clocks must agree that well), and,
from a sender not heard before, when it was sealed after this receiver started listening.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NONCE: Final = 12
_TAG: Final = 16
# Sender id (16), counter and time (20 digits each), separators: what sealing adds before base64.
SEAL_OVERHEAD: Final = _NONCE + _TAG + 16 + 2 * 20 + 3
FRESHNESS_MS: Final = 60_000
# A sender not heard before may have sealed this long before we listened (clock skew).
CLOCK_SLACK_MS: Final = 1_000
# Senders remembered (a replica gets a new id each start); the oldest is forgotten first.
SENDERS_KEPT: Final = 1024
# A sender whose payloads keep arriving stale (its clock is off by more than FRESHNESS_MS) is a gap
# at most this often: every payload a gap would cut off every subscriber each time.
STALE_GAP_EVERY_MS: Final = 30_000

log = logging.getLogger(__name__)


class Seal:
    """One replica's sealing and opening of payloads on one channel."""

    def __init__(self, secret: str, channel: str, *, now_ms: Callable[[], int] | None = None) -> None:
        self._key = hashlib.sha256(f"agentforge.cluster:{channel}:{secret}".encode()).digest()
        self._cipher: AESGCM | None = None  # built on first use (`load`)
        self._aad = channel.encode()
        self._now = now_ms or _now_ms  # wall-clock ms: compared across replicas
        self.sender = uuid.uuid4().hex[:16]
        self._count = 0
        self._last: OrderedDict[str, int] = OrderedDict()  # each sender's last counter taken
        self._excused: set[str] = set()  # senders whose next counter may jump (we stopped listening)
        self._stale_gap_at: dict[str, int] = {}  # when each sender's stale payloads were last a gap
        self._since = self._now()
        self.refused = 0  # payloads dropped: not sealed with the key, replayed, or stale
        self.gaps = 0  # payloads of others this replica should have heard and did not take

    @property
    def loaded(self) -> bool:
        """Whether the cipher is built: a replica that never speaks to another never builds it."""
        return self._cipher is not None

    def load(self) -> None:
        """Build the cipher. It imports cryptography (~7 MB, tens of ms): call it in a worker
        thread before sealing or opening on the event loop (either builds it itself otherwise)."""
        if self._cipher is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._cipher = AESGCM(self._key)

    def _aead(self) -> AESGCM:
        self.load()
        assert self._cipher is not None
        return self._cipher

    def seal(self, payload: str) -> str:
        self._count += 1
        plain = f"{self.sender} {self._count} {self._now()}\n{payload}".encode()
        nonce = os.urandom(_NONCE)
        return base64.b64encode(nonce + self._aead().encrypt(nonce, plain, self._aad)).decode()

    def skip(self) -> None:
        """Use a counter for a payload that will never be sealed: receivers see the gap."""
        self._count += 1

    def open(self, sealed: str) -> str | None:
        """The payload, or None when it was not sealed with the key, is a replay, or is stale
        (or is this replica's own)."""
        from cryptography.exceptions import InvalidTag

        try:
            raw = base64.b64decode(sealed, validate=True)
            plain = self._aead().decrypt(raw[:_NONCE], raw[_NONCE:], self._aad)
            header, _, body = plain.partition(b"\n")
            sender_bytes, count_text, sent_text = header.split(b" ")
            sender, count, sent = sender_bytes.decode(), int(count_text), int(sent_text)
        except (ValueError, InvalidTag):
            self.refused += 1
            return None
        if sender == self.sender:
            return None
        if not self._fresh(sender, count, sent):
            self.refused += 1
            if self._missed_stale(sender, count, sent):
                if self._stale_gap_due(sender, sent):
                    self.gaps += 1
                self._take(sender, count)  # its successor is no second gap
            return None
        if self._jumped(sender, count):
            self.gaps += 1
        self._take(sender, count)
        return body.decode()

    def _take(self, sender: str, count: int) -> None:
        self._excused.discard(sender)
        self._last[sender] = count
        self._last.move_to_end(sender)
        while len(self._last) > SENDERS_KEPT:
            self._excused.discard(self._last.popitem(last=False)[0])

    def _jumped(self, sender: str, count: int) -> bool:
        """Whether payloads of `sender` were sealed since the last one taken and never heard here."""
        last = self._last.get(sender)
        return last is not None and count > last + 1 and sender not in self._excused

    def _missed_stale(self, sender: str, count: int, sent: int) -> bool:
        """A genuine payload refused as stale that this replica should have taken: sealed while it
        listened, and newer than the last taken from its sender (a replay of one taken is not)."""
        last = self._last.get(sender)
        return sent >= self._since - CLOCK_SLACK_MS and (last is None or count > last)

    def _stale_gap_due(self, sender: str, sent: int) -> bool:
        now = self._now()
        last = self._stale_gap_at.get(sender)
        if last is not None and now - last < STALE_GAP_EVERY_MS:
            return False
        if len(self._stale_gap_at) >= SENDERS_KEPT:
            self._stale_gap_at.clear()
        self._stale_gap_at[sender] = now
        log.warning("cluster: sender %s sends stale payloads (clock off by %d ms?)", sender, now - sent)
        return True

    def listening_again(self) -> None:
        """After a gap in listening: what was sealed meanwhile is never accepted later (a role that
        can LISTEN could replay it); the gap is resynced from the log instead, so the senders'
        counters jumping over it is no further gap."""
        self._since = self._now()
        self._excused = set(self._last)

    def _fresh(self, sender: str, count: int, sent: int) -> bool:
        if abs(self._now() - sent) > FRESHNESS_MS or sent < self._since - CLOCK_SLACK_MS:
            return False
        last = self._last.get(sender)
        return last is None or count > last


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
