"""The local app by AWS service (docs/contributing/adding-an-emulated-service.md): one room per
service, sharing one `Account`; no service imports `LocalApp` (the circle it closed); `LocalApp`
the short sequence. (The rooms' sizes: test_layout's rule for the whole engine.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.test_layout import imports

pytestmark = pytest.mark.unit

LOCAL = Path(__file__).resolve().parents[2] / "hybridsync" / "local"
ROOMS = ("dynamodb", "awslambda", "postgres", "kinesis", "cloudwatch", "apigateway", "events", "iam", "vpc")


def modules() -> list[Path]:
    return sorted(p for p in LOCAL.rglob("*.py") if "__pycache__" not in p.parts)


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
    offenders = [str(p.relative_to(LOCAL)) for p in services if "hybridsync.local.app" in imports(p)]
    assert offenders == []


def test_the_app_is_the_short_sequence():
    tree = ast.parse((LOCAL / "app.py").read_text())
    (app,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LocalApp"]
    assert app.end_lineno - app.lineno < 400
