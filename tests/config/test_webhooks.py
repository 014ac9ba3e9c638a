"""The `webhooks` and `webhook_delivery` sections: what they accept, and what a tenant may not set."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentforge.config.sections import Config

GOOD = {"url": "https://hooks.example.com/forge", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}


@pytest.mark.parametrize(
    ("endpoint", "field"),
    [
        ({**GOOD, "secret": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "secret"),
        ({**GOOD, "secret": "whsec_***"}, "secret"),
        ({**GOOD, "secret": "whsec_c2hvcnQ="}, "secret"),
        ({**GOOD, "url": "ftp://hooks.example.com"}, "url"),
        ({**GOOD, "events": ["session.deleted"]}, "events"),
    ],
)
def test_a_bad_endpoint_is_refused_naming_its_field(endpoint: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Config.model_validate({"webhooks": [endpoint]})
    assert field in str(refused.value)


def test_every_event_by_default() -> None:
    [endpoint] = Config.model_validate({"webhooks": [GOOD]}).webhooks
    assert "session.idle" in endpoint.events and "question.asked" in endpoint.events


def test_a_tenant_overlay_may_set_webhooks_but_not_the_delivery_policy() -> None:
    Config.model_validate({"tenancy": {"overlays": {"acme": {"webhooks": [GOOD]}}}})
    with pytest.raises(ValidationError) as refused:
        overlay = {"webhook_delivery": {"allow_private": ["10.0.0.0/8"]}}
        Config.model_validate({"tenancy": {"overlays": {"acme": overlay}}})
    assert "webhook_delivery cannot be set per tenant" in str(refused.value)


def test_allow_private_matches_hosts_and_networks() -> None:
    policy = Config.model_validate(
        {"webhook_delivery": {"allow_private": ["hooks.internal", "10.1.0.0/16"]}}
    ).webhook_delivery
    assert policy.allows("hooks.internal", "10.9.9.9")
    assert policy.allows("other", "10.1.2.3")
    assert not policy.allows("other", "10.2.0.1")
    with pytest.raises(ValidationError):
        Config.model_validate({"webhook_delivery": {"allow_private": ["10.0.0.0/99"]}})
