"""CDK entry point: `npx cdk synth|deploy` (see README). Makes no AWS calls at synth time."""

from aws_cdk import App

from stacks import build

app = App()
build(app)
app.synth()
