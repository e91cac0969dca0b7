"""The typed public surface (issue 52): the engine ships `py.typed`, and mypy checks strictly every
module a project imports (`./scripts/test` runs it). A module of the surface cannot silently leave
the list in pyproject.toml's [tool.mypy], nor a new module of a public package go unchecked."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# what a project imports: its declarations, its writes, its routes' helpers (the pytest plugin is
# read from the entry point below)
SURFACE = (
    "hybridsync.model.declare",
    "hybridsync.dynamodb.writes",
    "hybridsync.api.web",
    "hybridsync.streams.changes",
)


def modules_of(name: str) -> set[str]:
    """A module's name, or a package's and each of its modules', found on disk."""
    path = ROOT / name.replace(".", "/")
    if not path.is_dir():
        assert path.with_suffix(".py").is_file(), name
        return {name}
    return {
        ".".join(p.relative_to(ROOT).with_suffix("").parts[: -1 if p.stem == "__init__" else None])
        for p in path.rglob("*.py")
        if "__pycache__" not in p.parts
    }


def checked(config: dict[str, object]) -> set[str]:
    """The modules mypy checks: those `modules` names and every module of the `packages`."""
    packages, modules = config.get("packages", []), config.get("modules", [])
    assert isinstance(packages, list) and isinstance(modules, list)
    return {found for package in packages for found in modules_of(package)} | set(modules)


def public_modules() -> set[str]:
    plugin = PYPROJECT["project"]["entry-points"]["pytest11"]["hybridsync"]
    return {m for name in (*SURFACE, plugin) for m in modules_of(name)}


def test_mypy_checks_every_public_module_strictly():
    config = PYPROJECT["tool"]["mypy"]
    assert config["strict"] is True
    assert config["follow_imports"] == "silent"  # what they import: read, its errors not reported
    public = public_modules()
    assert {"hybridsync.model.declare.entities", "hybridsync.testing.fuzz"} <= public  # packages' modules
    assert sorted(public - checked(config)) == []


def test_a_module_left_out_of_the_list_is_found():
    config = dict(PYPROJECT["tool"]["mypy"])
    config["modules"] = [m for m in config["modules"] if m != "hybridsync.api.web"]
    assert public_modules() - checked(config) == {"hybridsync.api.web"}


def test_the_engine_ships_py_typed():
    """PEP 561: a project's type checker reads the engine's annotations only when the package says so."""
    assert (ROOT / "hybridsync" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["hybridsync"]


def test_mypy_is_pinned_and_run_by_the_test_script():
    requirements = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert [line for line in requirements if line.startswith("mypy==")], "mypy is pinned"
    script = (ROOT / "scripts" / "test").read_text().splitlines()
    ruff = max(n for n, line in enumerate(script) if line.startswith("ruff "))
    assert next(line.split()[0] for line in script[ruff + 1 :] if line.strip()) == "mypy"
