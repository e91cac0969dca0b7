"""hybridsync: keep Amazon DynamoDB and PostgreSQL in sync, and the DynamoDB access patterns around it.

The modules a project calls are named here as well as in their layer's package
(`from hybridsync import declare, writes, rows, web, jobs, loads`; `hybridsync.testing` is a package
of its own). Each is imported when it is first asked for, so `import hybridsync` imports nothing
more: a function's cold start pays only for what it uses.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib.machinery import ModuleSpec
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


# --- the paths modules had before they were grouped by layer (CHANGELOG, 0.1.0) ---------------
# Each still imports, as the module it is now, with a DeprecationWarning naming the new path, until
# 1.0. A finder on sys.meta_path answers only for these names, so no module is added at
# the top of the package (tests/unit/test_layout.py) and nothing is imported before it is asked for.
# It stands first, so an old package's submodules (hybridsync.migrations.versions) are the new ones,
# never second copies; it answers for no name but these, and no module exists at any of them.
# (`hybridsync.runtime` is a package now: its old functions are `hybridsync.runtime.clients`'s.)
MOVED = {  # old path -> new path (a package's submodules follow it: hybridsync.migrations.versions)
    "hybridsync.records": "hybridsync.streams.records",
    "hybridsync.filters": "hybridsync.streams.filters",
    "hybridsync.declare": "hybridsync.model.declare",
    "hybridsync.keys": "hybridsync.model.keys",
    "hybridsync.versions": "hybridsync.model.versions",
    "hybridsync.limits": "hybridsync.model.limits",
    "hybridsync.convert": "hybridsync.model.convert",
    "hybridsync.placing": "hybridsync.model.placing",
    "hybridsync.config": "hybridsync.model.config",
    "hybridsync.errors": "hybridsync.model.errors",
    "hybridsync.settings": "hybridsync.runtime.settings",
    "hybridsync.aws": "hybridsync.runtime.aws",
    "hybridsync.db": "hybridsync.runtime.db",
    "hybridsync.doctor": "hybridsync.runtime.doctor",
    "hybridsync.store": "hybridsync.dynamodb.store",
    "hybridsync.cursors": "hybridsync.dynamodb.cursors",
    "hybridsync.writes": "hybridsync.dynamodb.writes",
    "hybridsync.capacity": "hybridsync.dynamodb.capacity",
    "hybridsync.views": "hybridsync.dynamodb.views",
    "hybridsync.large": "hybridsync.dynamodb.large",
    "hybridsync.distinct": "hybridsync.dynamodb.distinct",
    "hybridsync.reindex": "hybridsync.dynamodb.reindex",
    "hybridsync.scans": "hybridsync.dynamodb.scans",
    "hybridsync.exports": "hybridsync.dynamodb.exports",
    "hybridsync.timeseries": "hybridsync.dynamodb.timeseries",
    "hybridsync.schema": "hybridsync.sql.schema",
    "hybridsync.roles": "hybridsync.sql.roles",
    "hybridsync.rows": "hybridsync.sql.rows",
    "hybridsync.deadletters": "hybridsync.sql.deadletters",
    "hybridsync.migrations": "hybridsync.sql.migrations",
    "hybridsync.web": "hybridsync.api.web",
    "hybridsync.openapi": "hybridsync.api.openapi",
    "hybridsync.jobs": "hybridsync.sync.jobs",
    "hybridsync.costs": "hybridsync.sizing.costs",
    "hybridsync.plan": "hybridsync.sizing.plan",
    "hybridsync.context": "hybridsync.truth.context",
    "hybridsync.scaffold": "hybridsync.cli.scaffold",
    "hybridsync.cdk.rules": "hybridsync.truth",  # the deploy truth, a package of its own (issue 52)
    "hybridsync.cdk.context": "hybridsync.truth.context",  # read without starting aws_cdk's Node
}


def moved_to(name: str) -> str | None:
    """The path a module of an old path has now (None: not an old path)."""
    if not name.startswith("hybridsync."):
        return None
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


class _OldPaths:
    """Imports an old path as the module it is now, warning once per path and process."""

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        return ModuleSpec(name, cls) if moved_to(name) else None  # type: ignore[arg-type]

    @staticmethod
    def create_module(spec: ModuleSpec) -> None:
        return None

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        new = moved_to(module.__name__)
        warnings.warn(
            f"{module.__name__} is {new} now; import {new} (the old path stops importing at 1.0)",
            DeprecationWarning,
            stacklevel=2,  # the import statement's line (the import system's frames are skipped)
        )
        # the import system hands the importer what sys.modules holds for the name once this returns
        sys.modules[module.__name__] = importlib.import_module(new)  # type: ignore[arg-type]


sys.meta_path[:] = [  # once, whether or not the package is imported again (importlib.reload)
    _OldPaths,
    *(f for f in sys.meta_path if (getattr(f, "__module__", None), getattr(f, "__qualname__", None))
      != (__name__, "_OldPaths")),
]  # fmt: skip
