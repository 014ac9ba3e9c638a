"""Reading role lists from credentials: keys store validated roles; tokens and headers may carry more."""

from __future__ import annotations

from collections.abc import Iterable

from agentforge.identity.model import KNOWN_ROLES, MEMBER

DEFAULT_ROLES = frozenset({MEMBER})


class UnknownRole(ValueError):
    pass


def validate_roles(roles: Iterable[str]) -> frozenset[str]:
    """`roles` for a new API key: every one must be known; none given means member."""
    chosen = frozenset(roles)
    unknown = sorted(chosen - KNOWN_ROLES)
    if unknown:
        raise UnknownRole(f"unknown role(s) {', '.join(unknown)}: use {' or '.join(sorted(KNOWN_ROLES))}")
    return chosen or DEFAULT_ROLES


def roles_from_claim(value: object) -> frozenset[str]:
    """Roles from a JWT claim or identity header: a list, or a string separated by commas or spaces.

    Roles this server does not know (an identity provider's other groups) are ignored; a credential
    naming none of ours gets the member role, as an API key created without roles does.
    """
    if value is None:
        return DEFAULT_ROLES
    if isinstance(value, str):
        items: list[object] = list(value.replace(",", " ").split())
    elif isinstance(value, list):
        items = list(value)
    else:
        return DEFAULT_ROLES
    known = frozenset(item.strip() for item in items if isinstance(item, str)) & KNOWN_ROLES
    return known or DEFAULT_ROLES
