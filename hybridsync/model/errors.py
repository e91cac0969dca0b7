"""What went wrong, by kind: the write path's errors, each an HTTP status; a value or a record that
can never be stored or applied as it is (a 400 at the API, a dead letter in a stream consumer); and
a configuration the engine cannot run with (a missing variable, a model it cannot load)."""

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


class Rejected(Exception):
    """A record that can never be applied as it is: it becomes a dead letter with this reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ConfigurationError(RuntimeError):
    """The environment or the project names something the engine cannot use (a variable unset, a
    secret without its field, a model that does not load)."""
