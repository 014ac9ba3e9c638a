"""Signatures match the Standard Webhooks specification's own example."""

from __future__ import annotations

from agentforge.webhooks.signing import signed_headers


def test_the_specification_example() -> None:
    headers = signed_headers(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        b'{"test": 2432232314}',
    )
    assert headers["webhook-signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert headers["webhook-timestamp"] == "1614265330"
    assert headers["webhook-id"] == "msg_p5jXN8AQM9LWM0D4loKWxJek"
