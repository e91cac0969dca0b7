"""hybridsync: keep Amazon DynamoDB and PostgreSQL in sync, and the DynamoDB access patterns around it.

The modules a project calls are named here as well as in their layer's package
(`from hybridsync import declare, writes, rows, web, jobs, loads`; `hybridsync.testing` is a package
of its own). Each is imported when it is first asked for, so `import hybridsync` imports nothing
more: a function's cold start pays only for what it uses.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__version__ = "0.1.0"  # the one place (pyproject.toml reads it)

PUBLIC = {  # name -> the module it is
    "declare": "hybridsync.model.declare",
    "writes": "hybridsync.dynamodb.writes",
    "rows": "hybridsync.sql.rows",
    "web": "hybridsync.api.web",
    "jobs": "hybridsync.sync.jobs",
    "loads": "hybridsync.sync.loads",
}


def __getattr__(name: str) -> ModuleType:
    if name not in PUBLIC:
        raise AttributeError(f"module 'hybridsync' has no attribute {name!r}")
    module = importlib.import_module(PUBLIC[name])
    globals()[name] = module
    return module


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC})
