"""The CDK stacks of a model: data (its DynamoDB tables, streams and bucket), database
(PostgreSQL), pipeline (the engine's functions, their mappings and grants), the HTTP API, and
monitoring (every alarm, with its topic, and the dashboard).
Rendered from the model alone; synth makes no AWS calls.

    cdk.json:  {"app": "python3 app.py"}    # app.py: App(), build(app), synth_or_exit(app), all three
                                            # from hybridsync.cdk

`build` makes the stacks of the model pyproject.toml names (or of the one it is given); constructs of
your own go between it and `synth_or_exit`. (`python -m hybridsync.cdk` does the same, without a
file of yours.)

`synth` checks the templates against what AWS documents (the deploy truth, `hybridsync.truth`): a
policy, key, route or certificate that would fail in AWS fails the synth, naming the resource and
the AWS page. Importing this package imports aws_cdk (and starts jsii's Node): the local app and
`hybridsync doctor` read the deploy truth from `hybridsync.truth`, without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

__all__ = ["App", "DeployTruthError", "build", "synth", "synth_or_exit"]


def _quiet_node_banners() -> None:
    """Before aws_cdk starts jsii's Node process: jsii warns when that Node is near or past its end
    of life, and under `npx cdk synth` the warning comes out as Python bytes (`b'!!!...'`: jsii's
    Python runtime prints what is not its own JSON as it reads it). The CDK runs on it all the same;
    the Node versions hybridsync runs on are in the tutorial's "What you need"."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    node = shutil.which("node")
    if node and "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" not in os.environ:
        try:
            version = subprocess.run([node, "-p", "process.versions.node"], capture_output=True,
                                     text=True, timeout=10).stdout  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return
        os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = version.strip().split(".")[0]


def _settings_errors_as_sentences() -> None:
    """Under `npx cdk synth`, a setting or a model the stacks refuse (`-c freshness=fast`) ends the
    app with its one sentence, not a traceback: the stacks raise ValueError (or the model's
    ConfigurationError) naming the setting and what it accepts. Only errors raised by hybridsync's
    own code and left uncaught; anything else keeps Python's traceback."""
    from hybridsync.model.errors import ConfigurationError

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, trace: Any) -> None:
        last = trace
        while last is not None and last.tb_next is not None:
            last = last.tb_next
        raised_here = last is not None and last.tb_frame.f_code.co_filename.startswith(package)
        if issubclass(kind, ValueError | ConfigurationError) and raised_here:
            print(f"hybridsync: {error}", file=sys.stderr)
            sys.exit(1)
        previous(kind, error, trace)

    if getattr(sys.excepthook, "__qualname__", "") != hook.__qualname__:
        sys.excepthook = hook


# Before aws_cdk starts jsii's Node (its first import below): the banners quiet, and a refused setting
# said as one sentence (an app's first line imports `App` from here).
_quiet_node_banners()
_settings_errors_as_sentences()

from aws_cdk import App  # noqa: E402  (after the banners are quieted)

from hybridsync.cdk.app import build, synth, synth_or_exit  # noqa: E402
from hybridsync.truth import DeployTruthError  # noqa: E402
