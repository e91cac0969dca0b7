"""The local app by AWS service (docs/contributing/adding-an-emulated-service.md): one room per
service, sharing one `Account`; no service imports `LocalApp` (the circle it closed); and the rooms
stay small: no file over 700 lines, no function over 80, `LocalApp` the short sequence."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

LOCAL = Path(__file__).resolve().parents[2] / "hybridsync" / "local"
ROOMS = ("dynamodb", "awslambda", "postgres", "kinesis", "cloudwatch", "apigateway", "events", "iam", "vpc")


def modules() -> list[Path]:
    return sorted(p for p in LOCAL.rglob("*.py") if "__pycache__" not in p.parts)


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_each_service_has_its_room_and_its_init_only_names_it():
    for room in ROOMS:
        init = LOCAL / room / "__init__.py"
        assert init.is_file(), room
        body = ast.parse(init.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), f"{room}/__init__.py: a docstring only"


def test_no_service_imports_the_app():
    """The services share the Account (local/account.py); `LocalApp` only sequences them (the
    report of a run, which reads a `LocalApp`, is no service)."""
    shared = ("account.py", "names.py", "storage.py")
    services = [p for p in modules() if p.relative_to(LOCAL).parts[0] in (*ROOMS, *shared)]
    offenders = [str(p.relative_to(LOCAL)) for p in services if "hybridsync.local.app" in imported(p)]
    assert offenders == []


def test_no_file_over_700_lines_and_no_function_over_80():
    long_files = [str(p.relative_to(LOCAL)) for p in modules() if len(p.read_text().splitlines()) > 700]
    long_functions = [
        f"{p.relative_to(LOCAL)}: {node.name}"
        for p in modules()
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 80
    ]
    assert long_files == [] and long_functions == []


def test_the_app_is_the_short_sequence():
    tree = ast.parse((LOCAL / "app.py").read_text())
    (app,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LocalApp"]
    assert app.end_lineno - app.lineno < 400
