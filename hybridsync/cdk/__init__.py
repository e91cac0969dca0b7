"""The CDK stacks of a model: data (its DynamoDB tables, streams and bucket), database
(PostgreSQL), pipeline (the engine's functions, their mappings and grants), the HTTP API, and
monitoring (every alarm, with its topic, and the dashboard).
Rendered from the model alone; synth makes no AWS calls.

    cdk.json:  {"app": "python3 app.py"}    # app.py: App(), build(app), synth_or_exit(app)

`build` makes the stacks of the model pyproject.toml names (or of the one it is given); constructs of
your own go between it and `synth_or_exit`. (`python -m hybridsync.cdk` does the same, without a
file of yours.)

`synth` checks the templates against what AWS documents (hybridsync.cdk.rules): a policy, key, route
or certificate that would fail in AWS fails the synth, naming the resource and the AWS page.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeployTruthError", "build", "synth", "synth_or_exit"]


def __getattr__(name: str) -> Any:
    """`build` and `synth` import aws_cdk, which starts a Node process: only when asked for, so the
    local app and `hybridsync doctor` read the deploy truth (`hybridsync.cdk.rules`) without it."""
    if name in ("build", "synth", "synth_or_exit"):
        from hybridsync.cdk import app

        return getattr(app, name)
    if name == "DeployTruthError":
        from hybridsync.cdk.rules import DeployTruthError

        return DeployTruthError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
