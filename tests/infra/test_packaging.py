"""What `pip install hybridsync` gets: the wheel built from pyproject.toml holds every module of the
engine (each package under hybridsync/, its Alembic template, the runtime requirements the
layer is built from and the py.typed marker) and nothing of the example shop or the tests."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_every_engine_module_and_nothing_else(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(tmp_path)],
        check=True, cwd=tmp_path, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("hybridsync-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "hybridsync").rglob("*")
        if path.is_file() and path.suffix in (".py", ".mako", ".txt") and "__pycache__" not in path.parts
    }
    assert sources - names == set()
    assert {"hybridsync/sql/migrations/script.py.mako", "hybridsync/cdk/requirements-runtime.txt"} <= names
    assert "hybridsync/py.typed" in names  # PEP 561: a project's type checker reads the engine's types
    assert not [n for n in names if n.startswith(("shop", "tests", "examples", "bench"))]
