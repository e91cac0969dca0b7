"""The CDK app: `npx cdk synth` and `npx cdk deploy` run this file (cdk.json's "app").

hybridsync builds the stacks of the model `pyproject.toml` names ([tool.hybridsync] model): data,
database, pipeline, api and monitoring. Constructs of your own go between build and synth."""

from hybridsync.cdk import App, build, synth_or_exit  # App: aws_cdk's, Node started quietly

app = App()
stacks = build(app)  # {"data": ..., "database": ..., "pipeline": ..., "api": ..., "monitoring": ...}
synth_or_exit(app)  # checks the templates against what AWS documents; exits naming each finding
