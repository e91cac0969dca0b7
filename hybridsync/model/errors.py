"""What went wrong, by kind: the write path's errors, each an HTTP status; and a configuration the
engine cannot run with (a missing variable, a model it cannot load)."""

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


class ConfigurationError(RuntimeError):
    """The environment or the project names something the engine cannot use (a variable unset, a
    secret without its field, a model that does not load)."""
