"""The layout: the engine apart from the shop; its packages on floors, none importing one above it;
capabilities never import each other; what ships to Lambda is chosen by package and depends on
nothing that does not ship."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import hybridsync
from hybridsync.cdk.assets import SHIPPED
from tests.handlers import cold_start

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "hybridsync"
CAPABILITIES = ("sync", "reads", "local")
NEVER_SHIPPED = ("local", "cli", "cdk", "workloads", "testing", "sizing", "truth")
FLOORS = (
    ("model",),  # the declaring language, the value contract, the errors: the ground floor
    ("streams",),  # the stream record's vocabulary
    ("runtime",),  # settings, clients, the doctor's probe
    ("dynamodb", "sql"),  # the two sides
    ("reads", "sync", "sizing", "truth"),  # truth: the deploy truth (rules, the doctor's checks)
    ("api", "workloads", "cdk"),
    ("functions", "local"),
    ("cli", "testing"),
)


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def engine_modules() -> list[Path]:
    return sorted(p for p in ENGINE.rglob("*.py") if "__pycache__" not in p.parts)


def shipped_modules() -> list[Path]:
    return sorted(p for package in SHIPPED for p in (ENGINE / package).glob("*.py"))


def test_the_engine_never_imports_the_shop():
    """The shop is an example project; the engine knows only the model it is given."""
    offenders = [f"{p.relative_to(ROOT)}: {m}" for p in engine_modules() for m in imports(p)
                 if m.split(".")[0] in ("shop", "shop_workloads")]  # fmt: skip
    assert offenders == []


def test_what_ships_is_every_engine_package_but_the_tools():
    packages = {p.parent.relative_to(ENGINE).as_posix() for p in ENGINE.rglob("__init__.py")}
    packages = {"" if p == "." else p for p in packages}
    tools = {p for p in packages if p.split("/")[0] in NEVER_SHIPPED}
    assert set(SHIPPED) == packages - tools
    assert tools >= set(NEVER_SHIPPED)


def test_nothing_shipped_imports_what_is_not_shipped():
    tools = tuple(f"hybridsync.{name}" for name in NEVER_SHIPPED)
    offenders = [f"{p.relative_to(ROOT)}: {m}" for p in shipped_modules() for m in imports(p)
                 if m in tools or m.startswith(tuple(f"{t}." for t in tools))]  # fmt: skip
    assert offenders == []


@pytest.mark.parametrize("capability", ["sync", "reads"])
def test_a_capability_never_imports_a_sibling_capability_or_the_emulator(capability):
    """The local emulator runs the app (like the CLI, it may use every capability); nothing the
    functions ship depends on it."""
    others = [f"hybridsync.{c}" for c in CAPABILITIES if c != capability]
    for path in (ENGINE / capability).rglob("*.py"):
        bad = [m for m in imports(path) if any(m == o or m.startswith(o + ".") for o in others)]
        assert bad == [], path


def test_stream_consumers_never_import_each_other():
    consumers = {"writeback", "aggregate", "outbox"}
    for name in consumers:
        mine = imports(ENGINE / "sync" / f"{name}.py")
        assert not {f"hybridsync.sync.{c}" for c in consumers - {name}} & mine, name


# The packages that may open a Kinesis record themselves: the seam's own package, the stacks, the
# local emulator, and the deploy truth (`hybridsync/truth/`, when it stands).
KINESIS_READERS = ("streams", "cdk", "local", "truth")


def test_only_the_seam_reads_kinesis_records():
    """Every other module reads a change record through `hybridsync.streams.changes` (a source is
    one registry entry there), never through a source's own reader."""
    reader = "hybridsync.streams.kinesis"
    offenders = [f"{p.relative_to(ROOT)}: {m}" for p in engine_modules()
                 if p.relative_to(ENGINE).parts[0] not in KINESIS_READERS
                 for m in imports(p) if m == reader or m.startswith(f"{reader}.")]  # fmt: skip
    assert offenders == []


def test_the_top_level_holds_packages_only():
    """Every module stands in the package of its layer; `hybridsync/__init__.py` names the public ones."""
    assert sorted(p.name for p in ENGINE.glob("*.py")) == ["__init__.py"]
    assert {m for m in imports(ENGINE / "__init__.py") if m.startswith("hybridsync")} == set()


def test_no_import_runs_back_up_the_floors():
    """The packages by floor, from the ground up: a package imports only packages on floors below
    its own (the DynamoDB and SQL sides are siblings, as are the floors' other neighbours)."""
    floor = {package: n for n, packages in enumerate(FLOORS) for package in packages}
    packages = {p.parent.name for p in ENGINE.glob("*/__init__.py")}
    assert packages == set(floor), "a package of the engine is on no floor, or a floor names no package"
    offenders = []
    for path in engine_modules():
        mine = path.relative_to(ENGINE).parts[0]
        for module in imports(path):
            parts = module.split(".")
            if parts[0] != "hybridsync" or len(parts) < 2 or parts[1] not in floor or parts[1] == mine:
                continue
            if floor[parts[1]] >= floor[mine]:
                offenders.append(f"{path.relative_to(ROOT)}: {module}")
    assert offenders == []


def test_the_declaring_language_imports_nothing_of_the_engine_but_keys_and_limits():
    # limits: the value contract every declared item is checked against; errors: the Invalid a key
    # built over DynamoDB's key size raises (both leaf modules)
    model = ENGINE / "model"
    allowed = {"hybridsync.model", *(f"hybridsync.model.{name}" for name in ("keys", "limits", "errors"))}
    declare = sorted((model / "declare").glob("*.py"))  # a package: its siblings and these
    assert len(declare) > 1
    for path in declare:
        found = {m for m in imports(path) if m.startswith("hybridsync")}
        own = {m for m in found if m.startswith("hybridsync.model.declare.")}
        assert found - own <= allowed, path.name
    assert {m for m in imports(model / "limits.py") if m.startswith("hybridsync")} <= {
        "hybridsync.model.errors",
        "hybridsync.model.errors.Rejected",
    }


ROOM = {"module": 700, "class": 400, "function": 80}  # lines at most


def oversized(path: Path) -> list[str]:
    """The module, classes and functions of a file longer than their ROOM."""
    source, name = path.read_text(), path.relative_to(ROOT)
    found = [f"{name}: {n} lines"] if (n := len(source.splitlines())) > ROOM["module"] else []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            if (n := node.end_lineno - node.lineno + 1) > ROOM[kind]:
                found.append(f"{name}: {kind} {node.name}, {n} lines")
    return found


def test_no_room_of_the_engine_is_too_big_to_read():
    """Issue 52: no module over 700 lines, no class over 400, no function over 80, anywhere in the
    engine (declare.py had grown to 1,340 lines, rules.py to 1,410, LocalApp to 1,111)."""
    assert [line for path in engine_modules() for line in oversized(path)] == []


def test_the_aggregate_function_cold_starts_without_sqlalchemy_or_psycopg():
    """It touches only DynamoDB; PostgreSQL is reached only to store a dead letter, lazily."""
    printed = cold_start(
        "import hybridsync.functions.aggregate\n"
        "print(sorted(m for m in ('sqlalchemy', 'psycopg', 'alembic') if m in sys.modules))"
    )
    assert printed.strip() == "[]"


def test_importing_hybridsync_imports_none_of_its_modules():
    """The public modules are named at the top but imported when first asked for: a function's
    cold start pays only for what it uses."""
    probe = "import sys, hybridsync; print(sorted(m for m in sys.modules if m.startswith('hybridsync.')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(hybridsync.PUBLIC))
def test_a_public_module_imports_from_the_top(name):
    assert getattr(hybridsync, name) is importlib.import_module(hybridsync.PUBLIC[name])
    assert name in dir(hybridsync)


def test_the_cdk_app_is_app_py_at_the_top_as_in_every_init_project():
    """CDK's convention (`cdk init`): cdk.json runs `python3 app.py`, where a CDK user looks first;
    this repository's app.py is the one `hybridsync init` writes."""
    from hybridsync.cli import scaffold

    assert json.loads((ROOT / "cdk.json").read_text())["app"] == "python3 app.py"
    assert json.loads(scaffold.CDK_JSON.format(title="T"))["app"] == "python3 app.py"
    assert (ROOT / "app.py").read_text() == scaffold.APP


def test_the_layout_page_maps_the_floors_the_code_holds():
    """docs/reference/layout.md's Mermaid map of the floors is FLOORS, top to bottom: a contributor
    reads the rooms there, and a floor moved in the code moves on the page too."""
    page = (ROOT / "docs" / "reference" / "layout.md").read_text()
    chart = page.split("```mermaid\n", 1)[1].split("```", 1)[0]
    floors, members = [], None
    for line in (raw.strip() for raw in chart.splitlines()):
        if line.startswith("subgraph "):
            members = []
        elif line == "end":
            floors.append(tuple(sorted(members)))
            members = None
        elif members is not None:
            members.append(line)
    assert floors[::-1] == [tuple(sorted(floor)) for floor in FLOORS]
