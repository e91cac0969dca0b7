"""Which model the engine serves: the user's, named once, in their project.

    [tool.hybridsync]                  # in the project's pyproject.toml
    model = "myapp.model:MODEL"        # the Model declared with hybridsync.model.declare
    routes = ["myapp.api"]             # optional: modules that add HTTP routes to the API function
    seed = "myapp.seed:seed"           # optional: what `hybridsync up --seed` writes
    demo = "myapp.demo:run"            # optional: what `hybridsync up --demo` drives

`HYBRIDSYNC_MODEL` (and, for `cdk synth`, `-c model=...`) overrides `model`. In AWS the stacks set
`HYBRIDSYNC_MODEL` on every function, whose asset carries the user's package beside the engine.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from hybridsync.model.declare import Model
from hybridsync.model.errors import ConfigurationError

VARIABLE = "HYBRIDSYNC_MODEL"


def project_root(start: Path | None = None) -> Path | None:
    """The nearest folder, from `start` (the working directory) up, whose pyproject.toml has a
    [tool.hybridsync] table."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and "hybridsync" in _tool(candidate):
            return folder
    return None


def _tool(pyproject: Path) -> dict[str, Any]:
    import tomllib  # here: a function in Lambda reads its model from the environment, never a TOML file

    try:
        tool: dict[str, Any] = tomllib.loads(pyproject.read_text()).get("tool", {})  # TOML: any table
        return tool
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"{pyproject}: {error}") from None


@functools.cache
def settings(root: Path | None = None) -> dict[str, Any]:
    """The project's [tool.hybridsync] table ({} when there is none)."""
    root = root or project_root()
    if root is None:
        return {}
    found: dict[str, Any] = _tool(root / "pyproject.toml")["hybridsync"]
    if str(root) not in sys.path:  # the project's own packages import as they would installed
        sys.path.append(str(root))  # last: never in front of what is installed (or an asset's copy)
    return found


def model_spec(explicit: str | None = None) -> str:
    spec = explicit or os.environ.get(VARIABLE) or settings().get("model")
    if not spec:
        raise ConfigurationError(
            f"no model: set {VARIABLE}=package.module:MODEL, or name it in pyproject.toml "
            '([tool.hybridsync] model = "myapp.model:MODEL"); `hybridsync init` writes a project that does'
        )
    return spec


def load(spec: str) -> Any:
    """The object a `package.module:NAME` spec names."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # a missing module, or one that fails as it loads (a stale import...)
        said = str(error) if isinstance(error, ImportError) else f"{type(error).__name__}: {error}"
        raise ConfigurationError(f"{spec}: cannot import {module_name} ({said})") from None
    try:
        return getattr(module, attribute) if attribute else module
    except AttributeError:
        raise ConfigurationError(f"{spec}: {module_name} has no {attribute}") from None


@functools.cache
def model(spec: str | None = None) -> Model:
    """The user's model (see the module's doc)."""
    spec = model_spec(spec)
    found = load(spec)
    if not isinstance(found, Model):
        raise ConfigurationError(f"{spec} is a {type(found).__name__}, not a hybridsync.model.declare.Model")
    return found


def package_of(spec: str | None = None) -> str:
    """The top-level package the model lives in (what is shipped to Lambda beside the engine)."""
    return model_spec(spec).split(":")[0].split(".")[0]


def package_dir(spec: str | None = None) -> Path:
    """The folder of the model's top-level package (what ships to Lambda beside the engine)."""
    package = package_of(spec)
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ConfigurationError(f"the model's package {package!r} is not a folder package")
    return Path(next(iter(found.submodule_search_locations))).resolve()


def setting_list(name: str) -> list[str]:
    """A [tool.hybridsync] setting naming one or more `package.module[:NAME]` specs; in AWS the
    stacks pass it as `HYBRIDSYNC_<NAME>`, comma-separated."""
    value = os.environ.get(f"HYBRIDSYNC_{name.upper()}") or settings().get(name) or []
    specs = value.split(",") if isinstance(value, str) else list(value)
    return [spec.strip() for spec in specs if spec.strip()]


def hooks(name: str) -> list[Any]:
    """The objects a [tool.hybridsync] setting names (`routes`, `seed`, `demo`), loaded."""
    return [load(spec) for spec in setting_list(name)]
