"""A JSON Web Key Set fetched over HTTP without blocking the event loop, cached for a TTL.

A token whose `kid` is not in the cached set triggers one refetch (the issuer may have rotated its
keys), at most once per `refetch_interval` so random kids cannot make us hammer the issuer. When a
refetch fails, keys already cached keep working; with none cached the caller gets a 503.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

import httpx2
import jwt

from agentforge.identity.errors import UNAVAILABLE, AuthFailure

log = logging.getLogger(__name__)

FETCH_TIMEOUT_SECONDS: Final = 5.0
REFETCH_INTERVAL_SECONDS: Final = 10.0
UNKNOWN_KEY: Final = "invalid token: signing key not found"


class JwksCache:
    def __init__(
        self,
        url: str,
        *,
        ttl_seconds: float,
        refetch_interval: float = REFETCH_INTERVAL_SECONDS,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url
        self._ttl = ttl_seconds
        self._refetch_interval = refetch_interval
        self._http = httpx2.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS, transport=transport)
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()
        self.fetches = 0  # successful or not, for tests and metrics

    async def key(self, kid: str | None) -> jwt.PyJWK:
        """The key that signed a token with this `kid` (None: the set's only key)."""
        if self._stale():
            await self._refresh(lambda: self._stale())
        found = self._lookup(kid)
        if found is None and self._may_refetch():
            await self._refresh(lambda: self._lookup(kid) is None and self._may_refetch())
            found = self._lookup(kid)
        if found is None and not self._keys:
            raise _unavailable()
        if found is None:
            raise AuthFailure(UNKNOWN_KEY, method="jwt")
        return found

    async def aclose(self) -> None:
        await self._http.aclose()

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    def _stale(self) -> bool:
        return self._fetched_at is None or time.monotonic() - self._fetched_at >= self._ttl

    def _may_refetch(self) -> bool:
        return self._fetched_at is None or time.monotonic() - self._fetched_at >= self._refetch_interval

    async def _refresh(self, still_needed: Callable[[], bool]) -> None:
        async with self._lock:
            # Concurrent requests that waited for the lock reuse the fetch the first one made.
            if not still_needed():
                return
            try:
                self._keys = await self._fetch()
            except (httpx2.HTTPError, ValueError, jwt.PyJWKError) as exc:
                log.warning("fetching the JWKS from %s failed: %s", self._url, exc)
                if not self._keys:
                    raise _unavailable() from exc
            finally:
                # A failed fetch also counts: the next attempt waits for the refetch interval.
                self._fetched_at = time.monotonic()
                self.fetches += 1

    async def _fetch(self) -> dict[str | None, jwt.PyJWK]:
        response = await self._http.get(self._url)
        response.raise_for_status()
        document = response.json()
        if not isinstance(document, dict):
            raise ValueError("the JWKS is not a JSON object")
        key_set = jwt.PyJWKSet.from_dict(document)
        return {key.key_id: key for key in key_set.keys}


def _unavailable() -> AuthFailure:
    return AuthFailure(
        "cannot verify tokens right now: the signing key set is unavailable", status=UNAVAILABLE, method="jwt"
    )
