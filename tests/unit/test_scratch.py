"""A benchmark's folder (`workloads.scratch`): gone when its process ends well, kept and named on
stderr when an uncaught error ended it or the run kept it (a chaos loss, a fuzz finding)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = """
import sys
from hybridsync import workloads
folder = workloads.scratch("scratch-test-")
(folder / "server.log").write_text("what the run's servers wrote")
print(folder, flush=True)
{ending}
"""


@pytest.mark.parametrize(
    ("ending", "kept"),
    [
        ("", False),
        ("raise SystemExit(0)", False),
        ("raise RuntimeError('the run broke')", True),
        ("workloads.keep(folder); raise SystemExit(1)", True),
    ],
    ids=["ends well", "exits 0", "uncaught error", "kept by the run"],
)
def test_a_runs_folder_is_removed_unless_the_run_failed(ending: str, kept: bool):
    done = subprocess.run([sys.executable, "-c", RUN.format(ending=ending)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    folder = Path(done.stdout.split()[0])
    try:
        assert folder.exists() == kept, done.stderr
        assert (f"kept {folder}" in done.stderr) == kept, done.stderr
    finally:
        if folder.exists():
            (folder / "server.log").unlink()
            folder.rmdir()
