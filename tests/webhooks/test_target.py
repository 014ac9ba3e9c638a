"""The SSRF guard's judgement of addresses, through a resolver answering what each case needs."""

from __future__ import annotations

import pytest

from agentforge.config.webhooks import WebhookDeliveryConfig
from agentforge.webhooks.target import TargetRefused, check_target
from tests.fakes.resolver import resolve_as


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.5",
        "169.254.169.254",
        "::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of the cloud metadata address
        "64:ff9b:1::a9fe:a9fe",  # local-use NAT64 (RFC 8215)
        "::ffff:0:a9fe:a9fe",  # SIIT of the cloud metadata address
        "::a9fe:a9fe",  # IPv4-compatible form of it
        "fec0::1",  # site-local
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:5::1",  # 6to4 of 10.0.0.5
    ],
)
async def test_non_public_addresses_are_refused(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    resolve_as(monkeypatch, lambda host: [address] if host == "hooks.test" else [])
    with pytest.raises(TargetRefused, match="non-public address"):
        await check_target("https://hooks.test/forge", WebhookDeliveryConfig())


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "64:ff9b::5db8:d822", "2002:5db8:d822::1", "2606:4700::1111"]
)
async def test_public_addresses_pass(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    resolve_as(monkeypatch, lambda host: [address] if host == "hooks.test" else [])
    await check_target("https://hooks.test/forge", WebhookDeliveryConfig())


async def test_one_non_public_answer_among_public_ones_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    resolve_as(monkeypatch, lambda host: ["93.184.216.34", "127.0.0.1"] if host == "hooks.test" else [])
    with pytest.raises(TargetRefused, match=r"127\.0\.0\.1"):
        await check_target("https://hooks.test/forge", WebhookDeliveryConfig())
