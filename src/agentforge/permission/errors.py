"""The ways a permission check says no (KERNEL 7.4), as tool errors the model reads."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from agentforge.model.session import PermissionRule
from agentforge.tools.base import PermissionDeniedError

REJECTED_MESSAGE = "The user rejected permission to use this specific tool call."


class DeniedError(PermissionDeniedError):
    """A configured rule or a policy refuses the call. The model may try another way: the loop goes on."""

    blocks_loop = False

    def __init__(self, message: str, *, refused_by: str | None = None) -> None:
        super().__init__(message)
        self.refused_by = refused_by

    @classmethod
    def by_rule(cls, rule: PermissionRule, relevant: Iterable[PermissionRule]) -> DeniedError:
        shown = orjson.dumps([r.wire() for r in relevant]).decode()
        return cls(
            "The user has specified a rule which prevents you from using this specific tool call "
            f"(rule: {rule.permission} {rule.pattern!r} {rule.action}). "
            f"Here are some of the relevant rules: {shown}",
            refused_by="rule",
        )

    @classmethod
    def by_policy(cls, decided_by: str) -> DeniedError:
        # Recorded already, as the request's decision (permission.replied, decided by the policy).
        return cls(f"The permission policy ({decided_by}) prevents you from using this specific tool call.")


class RejectedError(PermissionDeniedError):
    """A person (or the deadline) said no to this call: the loop stops after this step."""

    blocks_loop = True

    def __init__(self, message: str = REJECTED_MESSAGE) -> None:
        super().__init__(message)


class CorrectedError(RejectedError):
    """A rejection with feedback; the feedback reaches the model in the tool error."""

    def __init__(self, feedback: str) -> None:
        super().__init__(
            "The user rejected permission to use this specific tool call with the following feedback: "
            + feedback
        )
        self.feedback = feedback


class ExpiredError(RejectedError):
    """Nobody answered before the deadline and the default is to deny."""

    def __init__(self, timeout_seconds: float) -> None:
        super().__init__(
            f"Nobody answered this permission request within {timeout_seconds:g} seconds, so it was "
            "denied by default. Do not retry the call; wait for the user."
        )
