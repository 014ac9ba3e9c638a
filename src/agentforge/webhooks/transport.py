"""The HTTP transport webhooks are POSTed through: it connects only to addresses the SSRF guard
checked.

Checking a URL and then letting the HTTP client resolve its host again leaves a gap: a DNS server
that answers a public address to the check and 127.0.0.1 to the connection (DNS rebinding) would
send the request inside. Here the network backend resolves the host itself, runs the guard on every
address (webhooks/target.py) and opens the TCP connection to one of those very addresses; the
request's Host header and the TLS server name (SNI, certificate check) still name the host, since
the connection pool sets those from the URL, not from what the socket is connected to. Environment
proxies are ignored (`trust_env=False`): a proxy would resolve the host on its own.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable

import httpcore2
import httpx2

from agentforge.config.webhooks import WebhookDeliveryConfig
from agentforge.webhooks.target import checked_addresses


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """A network backend that connects to checked addresses only."""

    def __init__(self, policy: WebhookDeliveryConfig) -> None:
        self._policy = policy
        self._network = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        addresses = await checked_addresses(host, port, self._policy)
        failure: Exception = ConnectionError(f"cannot connect to {host}")
        for address in addresses:  # in the resolver's order, like the client would
            try:
                return await self._network.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx's transport (request and error mapping), with a pool whose connections go through
    `GuardedBackend`: the transport takes no network backend of its own, so its pool is replaced."""

    def __init__(self, policy: WebhookDeliveryConfig) -> None:
        tls = _tls_context()
        super().__init__(verify=tls, trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=tls,
            network_backend=GuardedBackend(policy),
            max_connections=100,  # httpx's default limits
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
        )


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One for the process: loading the CA bundle takes ~30 ms, and a context is safe to share."""
    return httpx2.create_ssl_context(trust_env=False)
