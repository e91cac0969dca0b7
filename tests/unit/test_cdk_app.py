"""What `npx cdk synth` of a project shows: no Python bytes (jsii's Node end-of-life banner, printed
as `b'!!!...'` by jsii's Python runtime, is quieted before its Node starts: `hybridsync.cdk.App`),
and a setting the stacks refuse as one sentence, not a traceback."""

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


def test_a_refused_setting_ends_the_app_with_its_sentence_and_other_errors_keep_their_traceback():
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE_")}
    refused = ("from hybridsync.cdk import App\nfrom hybridsync.truth import context\n"
               "context.freshness(App(context={'freshness': 'fast'}))")  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", refused], env=env, capture_output=True, text=True, timeout=120
    )
    assert (run.returncode, run.stderr) == (1, "hybridsync: -c freshness=fast: one of realtime, economy\n")
    other = "from hybridsync.cdk import App\nraise ValueError('not hybridsync')"
    run = subprocess.run([sys.executable, "-c", other], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" in run.stderr and "not hybridsync" in run.stderr, run.stderr
