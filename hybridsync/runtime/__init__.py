"""Where a function runs and how it reaches its services: the settings the stacks put in its
environment (settings), boto3 clients pointed at local endpoints when they are given (aws),
PostgreSQL engines (db), the clients a Lambda container builds once and keeps (clients), the one
decorator every handler wears (handling), and the probe every handler answers, which tries from
inside a function what it can reach (doctor). It stands on the model (a container loads the user's
model) and under both sides of the sync."""

from typing import Any

# The clients lived here before the regroup (`hybridsync.runtime.engine()`); until 1.0 they still
# answer here, with a DeprecationWarning naming their module. A fixed list: nothing else imports
# `clients` (its SQLAlchemy) by accident into a function that does not use it.
_MOVED_CLIENTS = ("engine", "tracer", "dynamodb", "s3", "model", "tables")


def __getattr__(name: str) -> Any:
    if name not in _MOVED_CLIENTS:
        raise AttributeError(f"module 'hybridsync.runtime' has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(
        f"hybridsync.runtime.{name} is hybridsync.runtime.clients.{name} now; import "
        "hybridsync.runtime.clients (the old path stops importing at 1.0)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module("hybridsync.runtime.clients"), name)
