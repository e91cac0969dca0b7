"""The import graph: capabilities import the model and the shared vocabulary, never each other."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = ("sync", "reads", "local")


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("capability", ["sync", "reads"])
def test_a_capability_never_imports_a_sibling_capability_or_the_emulator(capability):
    """The local emulator runs the app (like the CLI, it may use every capability); nothing the
    functions ship depends on it."""
    others = [f"hybridsync.{c}" for c in CAPABILITIES if c != capability]
    for path in (ROOT / "hybridsync" / capability).rglob("*.py"):
        bad = [m for m in imports(path) if any(m == o or m.startswith(o + ".") for o in others)]
        assert bad == [], path


def test_stream_consumers_never_import_each_other():
    consumers = {"writeback", "aggregate", "outbox"}
    for name in consumers:
        mine = imports(ROOT / "hybridsync" / "sync" / f"{name}.py")
        assert not {f"hybridsync.sync.{c}" for c in consumers - {name}} & mine, name


def test_the_shared_vocabulary_imports_no_capability():
    for path in (ROOT / "hybridsync").glob("*.py"):
        if path.name == "cli.py":
            continue
        bad = [m for m in imports(path) if m.startswith(tuple(f"hybridsync.{c}" for c in CAPABILITIES))]
        assert bad == [], path


def test_the_aggregate_function_cold_starts_without_sqlalchemy_or_psycopg():
    """It touches only DynamoDB; PostgreSQL is reached only to store a dead letter, lazily."""
    probe = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import handler; "
        "print(sorted(m for m in ('sqlalchemy', 'psycopg', 'alembic') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT / "lambdas" / "aggregate"), str(ROOT)],
        capture_output=True, text=True, check=True,
        env={"PATH": "", "POWERTOOLS_METRICS_NAMESPACE": "hybridsync", "AWS_REGION": "us-east-1"},
    )  # fmt: skip
    assert out.stdout.strip() == "[]"
