"""Role lists from key options, JWT claims and gateway headers."""

from __future__ import annotations

import pytest

from agentforge.identity.model import ADMIN, MEMBER
from agentforge.identity.roles import UnknownRole, roles_from_claim, validate_roles


def test_a_new_key_gets_member_unless_told_otherwise() -> None:
    assert validate_roles([]) == frozenset({MEMBER})
    assert validate_roles(["admin", "member"]) == frozenset({ADMIN, MEMBER})


def test_a_new_key_refuses_unknown_roles() -> None:
    with pytest.raises(UnknownRole, match="owner"):
        validate_roles(["admin", "owner"])


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        (["admin", "member"], {ADMIN, MEMBER}),
        ("admin member", {ADMIN, MEMBER}),
        ("admin,member", {ADMIN, MEMBER}),
        (["admin", "billing", 7], {ADMIN}),
        (["billing"], {MEMBER}),
        (None, {MEMBER}),
        (42, {MEMBER}),
        ("", {MEMBER}),
    ],
)
def test_claims_keep_only_known_roles(claim: object, expected: set[str]) -> None:
    assert roles_from_claim(claim) == frozenset(expected)
