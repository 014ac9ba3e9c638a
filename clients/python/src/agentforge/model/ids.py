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


_TAIL = 14
# Random bytes become base62 digits in C: each byte below 248 (4 x 62) maps to one digit, the rest
# are dropped, so every digit is uniform. An id per streamed event makes this the hot path: one
# urandom call per ~280 ids (a syscall that also drops the GIL, letting the store threads in) and
# no per-digit arithmetic.
_DIGIT_OF_BYTE = bytes(ord(_BASE62[b % 62]) for b in range(256))
_UNUSED_BYTES = bytes(range(248, 256))
_POOL_BYTES = 4096
_pool = ""
_pool_at = 0


def _random_tail() -> str:
    global _pool, _pool_at
    with _lock:
        if _pool_at + _TAIL > len(_pool):
            _pool = os.urandom(_POOL_BYTES).translate(_DIGIT_OF_BYTE, _UNUSED_BYTES).decode("ascii")
            _pool_at = 0
        start = _pool_at
        _pool_at += _TAIL
        return _pool[start:_pool_at]


def _forget_pool() -> None:
    # A forked child must not hand out the same digits as its parent.
    global _pool, _pool_at
    _pool, _pool_at = "", 0


os.register_at_fork(after_in_child=_forget_pool)


def ascending(prefix: Prefix) -> str:
    """A new id that sorts after every id this process made before."""
    return f"{prefix}_{_next_stamp():012x}{_random_tail()}"


def descending(prefix: Prefix) -> str:
    """A new id that sorts before every id this process made before."""
    return f"{prefix}_{(~_next_stamp()) & _MASK48:012x}{_random_tail()}"


def has_prefix(value: str, prefix: Prefix) -> bool:
    return value.startswith(prefix + "_") and len(value) == len(prefix) + 27
