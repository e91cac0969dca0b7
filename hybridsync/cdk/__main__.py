"""`python -m hybridsync.cdk`: the CDK app of a project without an `app.py` of its own (cdk.json's
"app" of projects made before `hybridsync init` wrote one). Same as app.py: the model's stacks,
checked against what AWS documents (hybridsync.truth), one line per finding."""

from hybridsync.cdk import App, build, synth_or_exit

build(app := App())
synth_or_exit(app)
