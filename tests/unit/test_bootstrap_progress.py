"""The first `./scripts/up` installs the venv for minutes: it shows how far pip got, not silence."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_install_shows_its_progress():
    pip = "".join(f"Collecting package{n}==1.0\n  Downloading package{n}-1.0.whl\n" for n in range(1, 46))
    pip += "Installing collected packages: package1, package2\nSuccessfully installed package1 package2\n"
    script = "set -euo pipefail; source <(sed -n '/^progress() {/,/^}/p' scripts/bootstrap.sh); progress"
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, input=pip, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    # not a terminal here: a line every 20 packages; bash's $SECONDS ticks on the clock's whole
    # seconds, so even an instant run may show 1s
    lines = [re.sub(r"\(\d+s\)", "(Ns)", line) for line in done.stderr.splitlines()]
    assert lines[:3] == ["  20 packages collected (Ns)", "  40 packages collected (Ns)",
                         "  45 packages collected (Ns); installing them..."]  # fmt: skip
    assert lines[3].startswith("  installed in ")
    assert "4 minutes" in (ROOT / "scripts" / "bootstrap.sh").read_text()  # said before it starts
    assert "4 minutes" in (ROOT / "README.md").read_text()
