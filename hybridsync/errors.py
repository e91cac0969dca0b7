"""What the write path tells its caller went wrong: one error type per kind, each an HTTP status."""

from __future__ import annotations


class Invalid(ValueError):
    """The request names a field or parameter the model cannot accept (400)."""

    def __init__(self, field: str, message: str):
        super().__init__(message if field in message else f"{field}: {message}")
        self.field = field


class NotFound(LookupError):
    """No such item (404)."""


class Conflict(Exception):
    """The item changed since it was read, or the request contradicts what is stored (409)."""

    def __init__(self, message: str, codes: list[str] | None = None):
        super().__init__(message)
        self.codes = codes or []  # TransactWriteItems' cancellation code per action, if any
