"""`npx cdk synth` of a project shows no Python bytes: jsii's Node end-of-life banner (printed as
`b'!!!...'` by jsii's Python runtime) is quieted before its Node starts (`hybridsync.cdk.App`)."""

from __future__ import annotations

import os
import subprocess
import sys

from hybridsync.cli.scaffold import APP


def test_an_apps_first_import_starts_node_quietly():
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE_")}
    imports = "\n".join(line for line in APP.splitlines() if line.startswith(("from ", "import ")))
    assert imports.startswith("from hybridsync.cdk import App"), imports  # aws_cdk's, through hybridsync
    run = subprocess.run([sys.executable, "-c", f"{imports}\nApp()"], env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "b'" not in run.stderr and "end-of-life" not in run.stderr, run.stderr[-2000:]
