"""The SSRF guard: where a webhook may be sent.

The URL's host is resolved and every address it resolves to must be globally routable: loopback,
private (RFC 1918, unique-local), link-local (cloud metadata at 169.254.169.254), shared, reserved
and multicast addresses are refused unless the server's `webhook_delivery.allow_private` names the
host or a network holding the address. Checked before every attempt, since DNS answers change.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse

from agentforge.config.webhooks import WebhookDeliveryConfig


class TargetRefused(Exception):
    """The URL may not be called (the SSRF guard); never retried."""


async def check_target(url: str, policy: WebhookDeliveryConfig) -> None:
    parsed = urllib.parse.urlsplit(url)
    host = parsed.hostname or ""
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ConnectionError(f"cannot resolve {host}: {exc}") from exc  # may resolve later: retried
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]
        if not _is_public(address) and not policy.allows(host, address):
            raise TargetRefused(
                f"{host} resolves to {address}, a non-public address; "
                "list it in webhook_delivery.allow_private to allow it"
            )


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast
