"""CDK entry point of a project: `cdk synth|deploy` with `"app": "python -m hybridsync.cdk"` in
cdk.json (see the README). Makes no AWS call of its own (a stack pinned by `-c kms_key_arn=` has the
CDK CLI look its availability zones up: docs/deploying.md); refuses templates that would fail in AWS
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
