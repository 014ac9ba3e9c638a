"""Sortable, prefixed identifiers (KERNEL 1, "IDs").

An id is `<prefix>_<12 hex><14 base62>`. The hex part is the low 48 bits of
`ms_timestamp * 0x1000 + counter`, so ids made by one process sort in creation order;
"descending" ids invert those bits so that newer ids sort first (used for sessions).
The loop relies on plain string comparison of message ids.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Literal

Prefix = Literal["ses", "msg", "prt", "per", "que", "evt", "tool", "pty", "key", "aud", "whd"]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MASK48 = (1 << 48) - 1
_lock = threading.Lock()
_last_ms = 0
_counter = 0


def _next_stamp() -> int:
    global _last_ms, _counter
    with _lock:
        now = int(time.time() * 1000)
        if now > _last_ms:
            _last_ms, _counter = now, 0
        else:
            # Same millisecond (or clock went back): keep counting from the last one so
            # ids stay strictly increasing within this process.
            _counter += 1
            if _counter >= 0x1000:
                _last_ms, _counter = _last_ms + 1, 0
        return (_last_ms * 0x1000 + _counter) & _MASK48


def _random_tail(length: int = 14) -> str:
    # One urandom read per id: ids are made for every streamed delta, so this is on the hot path.
    value = int.from_bytes(os.urandom(11))
    digits = []
    for _ in range(length):
        value, digit = divmod(value, 62)
        digits.append(_BASE62[digit])
    return "".join(digits)


def ascending(prefix: Prefix) -> str:
    """A new id that sorts after every id this process made before."""
    return f"{prefix}_{_next_stamp():012x}{_random_tail()}"


def descending(prefix: Prefix) -> str:
    """A new id that sorts before every id this process made before."""
    return f"{prefix}_{(~_next_stamp()) & _MASK48:012x}{_random_tail()}"


def has_prefix(value: str, prefix: Prefix) -> bool:
    return value.startswith(prefix + "_") and len(value) == len(prefix) + 27
