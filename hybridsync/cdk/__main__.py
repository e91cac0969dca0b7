"""CDK entry point of a project: `cdk synth|deploy` with `"app": "python -m hybridsync.cdk"` in
cdk.json (see the README). Makes no AWS calls at synth time."""

from aws_cdk import App

from hybridsync.cdk import build

app = App()
build(app)
app.synth()
