"""The session layer's answers to bad requests: the server maps them to 404 and 400."""

from __future__ import annotations


class NotFoundError(Exception):
    """No such session, message or part for this tenant (404)."""


class InvalidInputError(Exception):
    """The request cannot be carried out as sent; the message says which field and why (400)."""
