"""The CDK app: `npx cdk synth` and `npx cdk deploy` run this file (cdk.json's "app").

hybridsync builds the stacks of the model `pyproject.toml` names ([tool.hybridsync] model): data,
database, pipeline, api and monitoring. Constructs of your own go between build and synth."""

from aws_cdk import App

from hybridsync.cdk import build, synth_or_exit

app = App()
stacks = build(app)  # {"data": ..., "database": ..., "pipeline": ..., "api": ..., "monitoring": ...}
synth_or_exit(app)  # checks the templates against what AWS documents; exits naming each finding
