"""CDK entry point of a project: `cdk synth|deploy` with `"app": "python -m hybridsync.cdk"` in
cdk.json (see the README). Makes no AWS calls at synth time; refuses templates that would fail in AWS
(hybridsync.cdk.rules), one line per finding."""

import sys

from aws_cdk import App

from hybridsync.cdk import DeployTruthError, build, synth

app = App()
build(app)
try:
    synth(app)
except DeployTruthError as refused:
    sys.exit(f"hybridsync: the synthesized templates would fail in AWS: {refused}")
