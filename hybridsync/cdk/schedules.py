"""The pipeline's scheduled functions: the sweep of orphaned large bodies, the time series' rotation,
and the outbox drain (SQL -> DynamoDB). Schedules invoke asynchronously: what fails past Lambda's
retries lands in the stack's queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from cdk_nag import NagSuppressions

from hybridsync.cdk.assets import HandlerFunction
from hybridsync.cdk.data import customer_key
from hybridsync.dynamodb import timeseries
from hybridsync.model.declare import Side
from hybridsync.truth import context

if TYPE_CHECKING:  # the stack this builds into, for its type only (it imports this module)
    from hybridsync.cdk.pipeline import PipelineStack

MAX_TIMEOUT_S = 900  # a Lambda function's longest run (Lambda guide, "Configure Lambda function timeout")
DRAIN_MEMORY_MB = 256  # the outbox drain's (hybridsync.sizing.plan prices it)


def add_sweep(stack: PipelineStack) -> None:
    """Orphaned large bodies (a writer that died between its body and its item): swept daily.
    Schedules invoke asynchronously: what fails past Lambda's retries lands in a queue."""
    sweep = stack.function(
        "Sweep",
        name="sweep",
        timeout=Duration.minutes(5),
        dead_letter_queue=stack.scheduled_failures,
        environment={"SWEEP_GRACE_S": str(stack.setting("sweep_grace_s"))},
    )
    parents = sorted({b.entity.table.name for b in stack.model.bodies})
    chunks = sorted({b.chunks.table.name for b in stack.model.bodies})
    sweep.function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["dynamodb:GetItem"], resources=[stack.data.tables[n].table_arn for n in parents]
        )
    )
    sweep.function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["dynamodb:Scan", "dynamodb:BatchWriteItem"],
            resources=[stack.data.tables[n].table_arn for n in chunks],
        )
    )
    for bodies in stack.model.bodies:
        stack.grant_bodies(sweep, ["s3:DeleteObject"], listing=True, prefix=bodies.object_prefix)
    events.Rule(
        stack,
        "SweepSchedule",
        schedule=events.Schedule.rate(Duration.hours(stack.setting("sweep_hours"))),
        targets=[targets.LambdaFunction(sweep.alias, retry_attempts=2)],
    )


def add_outbox_drain(stack: PipelineStack) -> HandlerFunction:
    """SQL -> DynamoDB: drain the outbox into the tables of the entities mastered in PostgreSQL.
    An EventBridge schedule starts the drain each minute, the finest any schedule runs ("60 second
    precision": EventBridge Scheduler's schedule types). Under freshness=realtime each run then
    polls the outbox every `outbox_poll_ms` until the next run takes over (one at a time: an
    advisory lock; hybridsync.sync.outbox.poll), so a commit waits a poll, not a minute; the
    reserved concurrency leaves room for that next run. Under economy a run drains once."""
    realtime = context.freshness(stack) == "realtime"
    period = Duration.minutes(stack.setting("outbox_drain_minutes"))
    if realtime and period.to_seconds() + 60 > MAX_TIMEOUT_S:  # a run must outlive its period
        raise ValueError(
            f"-c outbox_drain_minutes={stack.setting('outbox_drain_minutes')}: under freshness=realtime a "
            f"run polls until the next one, and Lambda runs at most {MAX_TIMEOUT_S} s: at most 14 minutes"
        )
    sql_sync = stack.function(
        "SqlSync",
        name="sql_sync",
        role="writer",
        # a run outlives its period: the next one takes over, or it goes on if that one is late
        timeout=Duration.seconds(min(period.to_seconds() * 2 + 60, MAX_TIMEOUT_S))
        if realtime
        else Duration.minutes(1),
        # it runs all month under realtime: 256 MB keeps that near $11 a month (`hybridsync plan`);
        # its work is waiting on PostgreSQL and DynamoDB, 16 puts at a time
        memory_size=DRAIN_MEMORY_MB,
        dead_letter_queue=stack.scheduled_failures,
        reserved_concurrency=context.by_freshness(stack, "sql_sync_reserved_concurrency"),
        environment={"OUTBOX_POLL_MS": str(stack.setting("outbox_poll_ms"))} if realtime else None,
    )
    tables = sorted({e.table.name for e in stack.model.mastered_in(Side.POSTGRESQL)})
    sql_sync.function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["dynamodb:PutItem"], resources=[stack.data.tables[n].table_arn for n in tables]
        )
    )
    CfnOutput(stack, "SqlSyncFunctionName", value=sql_sync.function.function_name)
    events.Rule(
        stack,
        "SqlSyncSchedule",
        schedule=events.Schedule.rate(period),
        targets=[targets.LambdaFunction(sql_sync.alias, retry_attempts=0)],
        enabled=stack.enabled,  # paused with the mappings
    )
    return sql_sync


def add_time_series(stack: PipelineStack) -> None:
    """Pattern 22: the rotation function, on a schedule and at deploy (so today's table exists
    before the first write); it may manage only tables named `<prefix>-<series>-*`."""
    # the stack's own: two stacks of different prefixes never rotate or drop each other's tables
    prefix = stack.node.try_get_context("timeseries_prefix") or context.names(stack)
    rotate = stack.function(
        "Rotate",
        name="rotate",
        timeout=Duration.minutes(15),
        dead_letter_queue=stack.scheduled_failures,
        environment={"TIMESERIES_PREFIX": prefix},
    )
    key = customer_key(stack)
    if key is not None:  # its tables under the key, as the stacks' own (DynamoDB guide, "Encryption at
        # rest: customer managed key": who creates such a table may describe the key and grant DynamoDB
        # its use)
        rotate.function.add_environment("TIMESERIES_KMS_KEY_ARN", key.key_arn)
        key.grant(rotate.function, "kms:DescribeKey", "kms:CreateGrant", "kms:Decrypt", "kms:Encrypt",
                  "kms:GenerateDataKey*", "kms:ReEncrypt*")  # fmt: skip
    names = [f"{prefix}-{series.table.name}-" for series in stack.model.time_series]
    tables = [stack.format_arn(service="dynamodb", resource="table", resource_name=f"{n}*") for n in names]
    rotate.function.add_to_role_policy(
        iam.PolicyStatement(
            actions=[
                "dynamodb:CreateTable",
                "dynamodb:DescribeTable",
                "dynamodb:UpdateTable",
                "dynamodb:DeleteTable",
                "dynamodb:Scan",
                # archives: point-in-time exports (recovery on at creation), followed to the end
                "dynamodb:UpdateContinuousBackups",
                "dynamodb:ExportTableToPointInTime",
                "dynamodb:DescribeExport",
            ],
            resources=tables,
        )
    )
    # ListTables and ListExports have no resource-level permissions: "*" or not at all.
    rotate.function.add_to_role_policy(
        iam.PolicyStatement(actions=["dynamodb:ListTables", "dynamodb:ListExports"], resources=["*"])
    )
    # the export writes the archive with the caller's permissions
    stack.grant_bodies(rotate, ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
                       prefix=timeseries.ARCHIVE_PREFIX)  # fmt: skip
    NagSuppressions.add_resource_suppressions(
        rotate.function.role,
        [
            {
                "id": "AwsSolutions-IAM5",
                "reason": "A table per day is created at run time: the grant is "
                "the series' name prefix; ListTables and ListExports take no resource.",
                "applies_to": [
                    "Resource::*",
                    *({"regex": f"/^Resource::.*:table\\/{n}\\*$/g"} for n in names),
                ],
            }
        ],
        apply_to_children=True,
    )
    events.Rule(
        stack,
        "RotateSchedule",
        schedule=events.Schedule.rate(Duration.hours(stack.setting("rotate_hours"))),
        targets=[targets.LambdaFunction(rotate.alias, retry_attempts=2)],
    )
    stack.at_deploy("TimeSeriesTables", rotate, {"Prefix": prefix})
