"""Every import path a module had before the engine was grouped by layer still imports, as the module
it is now, with a DeprecationWarning naming the new path (issue 51, item 9): a project written
before the regroup failed with `No module named 'hybridsync.declare'`, the CHANGELOG's table its
only way out. Each old path is imported in a fresh interpreter, so none is already loaded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import hybridsync

ROOT = Path(__file__).resolve().parents[2]
# rows of the CHANGELOG's table that are not a module moved whole
NOT_MODULES = {
    "hybridsync.runtime",  # a package now, whose functions are hybridsync.runtime.clients's
    "hybridsync.settings.ConfigurationError",  # a name: hybridsync.settings still exports it
}


def changelog_table() -> dict[str, str]:
    rows = re.findall(
        r"^\| `(hybridsync[\w.]*)` \| `(hybridsync[\w.]*)` \|$", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    return dict(rows)


def test_every_module_path_the_changelog_moved_is_kept():
    table = changelog_table()
    assert len(table) > 30
    assert {old: new for old, new in table.items() if old not in NOT_MODULES} == hybridsync.MOVED


PROBE = """
import importlib, json, sys, warnings
import hybridsync
out = {}
for old, new in sorted(hybridsync.MOVED.items()):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        __import__(old)  # as an import statement does (importlib.import_module is a frame between)
        module = sys.modules[old]
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)
            and w.filename == __file__ and old in str(w.message)]
    out[old] = [module is importlib.import_module(new), said]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from hybridsync.declare import Entity  # the issue's own line
    from hybridsync.settings import ConfigurationError
    from hybridsync import records
    import hybridsync.migrations.versions.hybridsync_0001_engine as engine_branch
from hybridsync.model.declare import Entity as Now
from hybridsync.model.errors import ConfigurationError as Error
import hybridsync.streams.records, hybridsync.sql.migrations.versions.hybridsync_0001_engine as branch
out["names"] = [Entity is Now, ConfigurationError is Error, records is hybridsync.streams.records,
                engine_branch is branch]
print(json.dumps(out))
"""


def test_every_old_path_imports_the_new_module_warning_where_it_is_imported(tmp_path):
    probe = tmp_path / "old_paths_probe.py"
    probe.write_text(PROBE)
    run = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout)
    assert found.pop("names") == [True] * 4
    for old, (same, said) in found.items():
        new = hybridsync.MOVED[old]
        assert same, old
        assert said == [f"{old} is {new} now; import {new} (the old path stops importing at 1.0)"], old


def test_a_public_module_named_at_the_top_imports_without_a_warning():
    """`from hybridsync import declare` is the documented way: it does not warn."""
    probe = "import warnings; warnings.simplefilter('error'); from hybridsync import declare, writes, rows"
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT)


def test_a_name_that_never_was_a_module_is_still_not_found():
    probe = "import hybridsync.nowhere"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False)
    assert "No module named 'hybridsync.nowhere'" in run.stderr


def test_the_clients_still_answer_from_hybridsync_runtime_with_a_warning():
    script = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "import hybridsync.runtime as r, hybridsync.runtime.clients as c\n"
        "try:\n    r.engine\nexcept DeprecationWarning as w:\n    print(w)\n"
        "warnings.simplefilter('ignore'); assert r.engine is c.engine and r.tables is c.tables\n"
        "try:\n    r.nothing\nexcept AttributeError as e:\n    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "hybridsync.runtime.engine is hybridsync.runtime.clients.engine now; import "
        "hybridsync.runtime.clients (the old path stops importing at 1.0)",
        "module 'hybridsync.runtime' has no attribute 'nothing'",
    ]
