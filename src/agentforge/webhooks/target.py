"""The SSRF guard: where a webhook may be sent.

The URL's host is resolved and every address it resolves to must be globally routable: loopback,
private (RFC 1918, unique-local), link-local (cloud metadata at 169.254.169.254), shared, reserved
and multicast addresses are refused unless the server's `webhook_delivery.allow_private` names the
host or a network holding the address. IPv6 addresses that embed an IPv4 one (mapped, NAT64
64:ff9b::/96, 6to4 2002::/16) are judged by that IPv4 address. Checked before every attempt, and
again when the connection is opened (webhooks/transport.py connects to the addresses checked then,
so a DNS answer that changes in between, DNS rebinding, cannot send the request elsewhere).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from typing import Final

from agentforge.config.webhooks import WebhookDeliveryConfig

NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
# IPv6 prefixes whose last 32 bits are an IPv4 address: NAT64, SIIT (::ffff:0:a.b.c.d) and the old
# IPv4-compatible form (::a.b.c.d).
EMBEDDING_IPV4: Final = (
    NAT64,
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("::/96"),
)
# Prefixes refused whatever they embed: local-use NAT64 (RFC 8215, the IPv4 address split around
# bits 64-71) and the deprecated site-local range.
NEVER_PUBLIC: Final = (ipaddress.IPv6Network("64:ff9b:1::/48"), ipaddress.IPv6Network("fec0::/10"))


class TargetRefused(Exception):
    """The URL may not be called (the SSRF guard); never retried."""


async def check_target(url: str, policy: WebhookDeliveryConfig) -> None:
    parsed = urllib.parse.urlsplit(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    await checked_addresses(parsed.hostname or "", port, policy)


async def checked_addresses(host: str, port: int, policy: WebhookDeliveryConfig) -> list[str]:
    """The addresses `host` resolves to, once every one of them passed the guard (TargetRefused
    otherwise; ConnectionError when it does not resolve, which may change: retried)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ConnectionError(f"cannot resolve {host}: {exc}") from exc
    addresses = list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))
    for address in addresses:
        if not _is_public(address) and not policy.allows(host, address):
            raise TargetRefused(
                f"{host} resolves to {address}, a non-public address; "
                "list it in webhook_delivery.allow_private to allow it"
            )
    if not addresses:
        raise ConnectionError(f"cannot resolve {host}: no address")
    return addresses


def _is_public(address: str) -> bool:
    parsed = ipaddress.ip_address(address)
    if isinstance(parsed, ipaddress.IPv6Address) and any(parsed in prefix for prefix in NEVER_PUBLIC):
        return False
    ip = _embedded_ipv4(parsed)
    return ip.is_global and not ip.is_multicast


def _embedded_ipv4(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The IPv4 address an IPv6 one reaches through a translator or a tunnel, if any: 64:ff9b::7f00:1
    (NAT64) and 2002:7f00:1:: (6to4) reach 127.0.0.1, and must be judged as it."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if any(ip in prefix for prefix in EMBEDDING_IPV4):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    return ip
