"""The whole deployment of a model: its five stacks with cdk-nag and checkov's skips as aspects, and
the synth that refuses templates the deploy truth finds fault with (see hybridsync.cdk)."""

from __future__ import annotations

import sys

from aws_cdk import App, Aspects, Environment, cx_api
from cdk_nag import AwsSolutionsChecks

from hybridsync.cdk.api import ApiStack
from hybridsync.cdk.checks import CheckovSkips
from hybridsync.cdk.data import DataStack
from hybridsync.cdk.database import DatabaseStack
from hybridsync.cdk.monitoring import MonitoringStack
from hybridsync.cdk.pipeline import PipelineStack
from hybridsync.cdk.standby import standby_stacks
from hybridsync.model import config
from hybridsync.model.declare import Model, partition_of, regions
from hybridsync.truth import DeployTruthError, Templates, context, enforce
from hybridsync.truth.context import SETTINGS


def _flag(app: App, name: str) -> bool:
    return bool(context.read(app, name))


def _environment(app: App, model: Model) -> Environment | None:
    """A customer-managed key (`-c kms_key_arn=`) lives in one account and region: the stacks are
    pinned to them (a table's KMS settings cannot be rendered for any region). Replicas pin the
    stacks to their home Region (CDK renders no replica in a Region-agnostic stack)."""
    arn = app.node.try_get_context("kms_key_arn")
    pinned = None
    if arn:
        parts = str(arn).split(":")
        if len(parts) < 6 or parts[2] != "kms" or not parts[5].startswith("key/"):
            raise ValueError(
                f"-c kms_key_arn={arn}: not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)"
            )
        pinned = Environment(account=parts[4], region=parts[3])
    replicated = {t.name: where for t in model.tables if (where := context.replicas(app, t))}
    if not replicated:
        return pinned
    if pinned:  # a key is regional: each replica would need one of its own (replicaKeyArns)
        raise ValueError(
            "replicas with -c kms_key_arn: a KMS key serves one Region and each replica needs its own; "
            "hybridsync does not take replicas' keys yet: drop one of the two"
        )
    # said, never taken from the CLI's profile: the stateful stacks would follow whoever runs synth
    home = app.node.try_get_context("home_region")
    if not home:
        raise ValueError(
            "replicas need a home Region, where PostgreSQL's writer and the consumers run: "
            '"home_region": "us-east-1" in cdk.json\'s context (or -c home_region=us-east-1)'
        )
    (home,) = regions((str(home),), "-c home_region")
    for table, where in replicated.items():
        if home in where:
            raise ValueError(
                f"table {table!r}: its replicas name the home Region {home}; replicas are the others"
            )
        # partitions share no account, so no table spans two (aws, aws-cn, aws-us-gov, ...)
        if len(spans := {partition_of(r) for r in (home, *where)}) > 1:
            raise ValueError(
                f"table {table!r}: {home} and its replicas {', '.join(where)} are in different AWS "
                f"partitions ({', '.join(sorted(map(str, spans)))}); a global table stays in one"
            )
    return Environment(region=home)  # no account: nothing is looked up at synth


def build(app: App, model: Model | None = None) -> dict[str, object]:
    """The whole deployment of `model` (by default the project's; `-c model=pkg.mod:MODEL`
    overrides). Context: `prefix`, `dev`, `existing_db_secret_arn`, `tracing`, `public_api`."""
    spec = app.node.try_get_context("model") or None
    model = model or config.model(spec)
    prefix = app.node.try_get_context("prefix") or SETTINGS["prefix"].default
    dev = _flag(app, "dev")
    env = _environment(app, model)
    data = DataStack(app, f"{prefix}-data", model=model, dev=dev, env=env)
    database = DatabaseStack(app, f"{prefix}-database", dev=dev, env=env)
    pipeline = PipelineStack(
        app,
        f"{prefix}-pipeline",
        model=model,
        model_spec=config.model_spec(spec),
        data=data,
        database=database,
        tracing=_flag(app, "tracing"),
        env=env,
    )

    api = ApiStack(
        app, f"{prefix}-api", function=pipeline.api.alias, public=_flag(app, "public_api"), env=env
    )
    monitoring = MonitoringStack(app, f"{prefix}-monitoring", model=model, data=data, database=database,
                                 pipeline=pipeline, api=api, env=env)  # fmt: skip
    standby = standby_stacks(app, model, prefix, database, model_spec=config.model_spec(spec),
                             tracing=_flag(app, "tracing"))  # fmt: skip
    Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    Aspects.of(app).add(CheckovSkips())
    return {"data": data, "database": database, "pipeline": pipeline, "api": api, "monitoring": monitoring,
            **standby}  # fmt: skip


def synth(app: App) -> cx_api.CloudAssembly:
    """`app.synth()`, then the deploy truth on every stack of it: DeployTruthError lists each
    finding (rule, resource, what fails in AWS, the AWS page)."""
    assembly = app.synth()
    enforce(Templates({stack.stack_name: stack.template for stack in assembly.stacks}))
    return assembly


def synth_or_exit(app: App) -> None:
    """A CDK app's last line: `synth`, and on a finding exit with one line per finding, as `cdk
    synth` shows it, rather than a traceback."""
    try:
        synth(app)
    except DeployTruthError as refused:
        sys.exit(f"hybridsync: the synthesized templates would fail in AWS: {refused}")
