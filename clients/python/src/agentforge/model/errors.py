"""Named errors stored on assistant messages and published as `session.error` (KERNEL 3.3).

Each has the shape `{name, data}`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from agentforge.model.base import Wire


class ProviderAuthErrorData(Wire):
    provider_id: str = Field(alias="providerID")
    message: str


class ProviderAuthError(Wire):
    name: Literal["ProviderAuthError"] = "ProviderAuthError"
    data: ProviderAuthErrorData


class MessageData(Wire):
    message: str


class UnknownErrorData(Wire):
    message: str
    ref: str | None = None


class UnknownError(Wire):
    name: Literal["UnknownError"] = "UnknownError"
    data: UnknownErrorData


class MessageOutputLengthError(Wire):
    name: Literal["MessageOutputLengthError"] = "MessageOutputLengthError"
    data: dict[str, Any] = Field(default_factory=dict)


class MessageAbortedError(Wire):
    name: Literal["MessageAbortedError"] = "MessageAbortedError"
    data: MessageData


class StructuredOutputErrorData(Wire):
    message: str
    retries: int = 0


class StructuredOutputError(Wire):
    name: Literal["StructuredOutputError"] = "StructuredOutputError"
    data: StructuredOutputErrorData


class ContextOverflowErrorData(Wire):
    message: str
    response_body: str | None = Field(default=None, alias="responseBody")


class ContextOverflowError(Wire):
    name: Literal["ContextOverflowError"] = "ContextOverflowError"
    data: ContextOverflowErrorData


class ContentFilterError(Wire):
    name: Literal["ContentFilterError"] = "ContentFilterError"
    data: MessageData


class APIErrorData(Wire):
    message: str
    status_code: int | None = Field(default=None, alias="statusCode")
    is_retryable: bool = Field(default=False, alias="isRetryable")
    response_headers: dict[str, str] | None = Field(default=None, alias="responseHeaders")
    response_body: str | None = Field(default=None, alias="responseBody")
    metadata: dict[str, str] | None = None


class APIError(Wire):
    name: Literal["APIError"] = "APIError"
    data: APIErrorData


NamedError = Annotated[
    ProviderAuthError
    | UnknownError
    | MessageOutputLengthError
    | MessageAbortedError
    | StructuredOutputError
    | ContextOverflowError
    | ContentFilterError
    | APIError,
    Field(discriminator="name"),
]


def unknown_error(message: str) -> UnknownError:
    return UnknownError(data=UnknownErrorData(message=message))


def aborted_error(message: str = "The operation was aborted.") -> MessageAbortedError:
    return MessageAbortedError(data=MessageData(message=message))


def api_error(
    message: str,
    *,
    status_code: int | None = None,
    retryable: bool = False,
    response_headers: dict[str, str] | None = None,
    response_body: str | None = None,
) -> APIError:
    return APIError(
        data=APIErrorData(
            message=message,
            status_code=status_code,
            is_retryable=retryable,
            response_headers=response_headers,
            response_body=response_body,
        )
    )
