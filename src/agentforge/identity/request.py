"""What the authenticator sees of a request: method, target, headers and the peer address.

Kept free of any web framework so the identity package sits below the server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestFacts:
    method: str
    target: str  # the raw path as sent, plus `?` and the raw query string when there is one
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its first value
    peer: str | None = None  # the client's IP address as the socket sees it

    @classmethod
    def of(
        cls,
        method: str,
        path: str,
        query: str,
        headers: Iterable[tuple[str, str]],
        peer: str | None,
    ) -> RequestFacts:
        collected: dict[str, str] = {}
        for name, value in headers:
            collected.setdefault(name.lower(), value)
        target = f"{path}?{query}" if query else path
        return cls(method.upper(), target, collected, peer)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())
