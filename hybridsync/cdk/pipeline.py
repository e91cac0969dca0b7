"""Pipeline stack: the shared dependency layer and code asset, the engine's functions as the model
needs them (write-back, aggregation, the outbox drain, the API, the sweep of large bodies, the
time-series rotation), each published as a version behind its `live` alias, their stream mappings
(failed batches, records included, to the stack's failure bucket), grants, and the schema migration
on deploy, which every function that needs the schema waits for. Every grant, filter and variable
derives from the model: there is no second list of anything. Its alarms: the monitoring stack."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import ArnFormat, CfnOutput, CustomResource, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from aws_cdk import custom_resources as cr
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync.cdk import context
from hybridsync.cdk.assets import (
    PROJECT_MIGRATIONS,
    TRUST_STORE,
    HandlerFunction,
    dependency_layer,
    function_code,
)
from hybridsync.cdk.data import DataStack, customer_key, private_bucket, title
from hybridsync.cdk.database import DatabaseStack
from hybridsync.dynamodb import timeseries
from hybridsync.model import config
from hybridsync.model.declare import Model, Side, Table
from hybridsync.sql import migrations
from hybridsync.sync import aggregate, failed, writeback


def _digest(*folders: Path | None) -> str:
    """Changes whenever a revision file does, so the schema resource re-runs on such a deploy."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")) if folder and folder.is_dir() else []:
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass
class Consumer:
    """A stream consumer: its function, and its mappings (the source table, the mapping's id)."""

    name: str
    handler: HandlerFunction
    mappings: list[tuple[str, str]] = field(default_factory=list)


@jsii.implements(lambda_.IEventSourceDlq)
class FailureBucket:
    """A stream mapping's on-failure destination in S3: Lambda stores the whole invocation record,
    the batch's records included, under `aws/lambda/<mapping>/<shard>/...` (Lambda developer guide,
    "Retain discarded records": S3 destinations), with the function's role: it may put objects
    under that prefix and list the bucket, nothing else."""

    def __init__(self, bucket: s3.IBucket):
        self.bucket = bucket

    def bind(
        self, _target: lambda_.IEventSourceMapping, handler: lambda_.IFunction
    ) -> lambda_.DlqDestinationConfig:
        grant_prefix(handler, self.bucket, ["s3:PutObject"], failed.PREFIX, listing="any")
        return lambda_.DlqDestinationConfig(destination=self.bucket.bucket_arn)


def grant_prefix(
    function: lambda_.IFunction,
    bucket: s3.IBucket,
    actions: list[str],
    prefix: str,
    *,
    listing: bool | str = False,
) -> None:
    """Object actions on one prefix of a bucket, nothing wider; `listing`: ListBucket on that prefix
    (or, "any", on the bucket: what Lambda's S3 destination asks for)."""
    prefix = f"{prefix.rstrip('/')}/*"
    function.add_to_role_policy(
        iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(prefix)])
    )
    sealed = {"s3:PutObject", "s3:GetObject"} & set(actions)
    if bucket.encryption_key is not None and sealed:  # a customer-managed key seals and opens the objects
        bucket.encryption_key.grant_encrypt_decrypt(function)
    if listing:
        conditions = None if listing == "any" else {"StringLike": {"s3:prefix": [prefix]}}
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"], resources=[bucket.bucket_arn], conditions=conditions
            )
        )
    assert function.role is not None
    escaped = prefix[:-2].replace("/", "\\/")
    NagSuppressions.add_resource_suppressions(
        function.role,
        [
            {
                "id": "AwsSolutions-IAM5",
                "reason": "Objects named at run time (review bodies by review and version, archives by "
                "table, failed batches by mapping and shard) under one prefix of one bucket; the grant "
                "is that prefix.",
                "applies_to": [{"regex": f"/^Resource::.*\\/{escaped}\\/\\*$/g"}],
            }
        ],
        apply_to_children=True,
    )


# What Lambda's poller reads a Kinesis stream with, and an enhanced fan-out consumer: Lambda guide,
# "Process Amazon Kinesis Data Streams records with Lambda" (execution role permissions)
KINESIS_READ = [
    "kinesis:DescribeStream",
    "kinesis:DescribeStreamSummary",
    "kinesis:ListShards",
    "kinesis:GetRecords",
    "kinesis:GetShardIterator",
]
FAN_OUT_READ = ["kinesis:SubscribeToShard", "kinesis:DescribeStreamConsumer"]
MAX_TIMEOUT_S = 900  # a Lambda function's longest run (Lambda guide, "Configure Lambda function timeout")
DRAIN_MEMORY_MB = 256  # the outbox drain's (hybridsync.sizing.plan prices it)
MAX_RECORD_AGE_H = 168  # MaximumRecordAgeInSeconds: at most 604,800 s (Lambda's stream mapping parameters)


def grant_kinesis_read(
    function: lambda_.IFunction, stream: kinesis.IStream, consumer: kinesis.IStreamConsumer | None = None
) -> None:
    """What reading `stream` takes, nothing wider: the stream's read actions, an enhanced fan-out
    `consumer`'s subscription, and kms:Decrypt of a customer key (Kinesis guide, "Permissions to use
    user-generated KMS keys": a consumer needs kms:Decrypt)."""
    function.add_to_role_policy(iam.PolicyStatement(actions=KINESIS_READ, resources=[stream.stream_arn]))
    if consumer is not None:
        function.add_to_role_policy(
            iam.PolicyStatement(actions=FAN_OUT_READ, resources=[consumer.stream_consumer_arn])
        )
    if stream.encryption_key is not None:
        stream.encryption_key.grant_decrypt(function)


ITEM_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
]


class PipelineStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        model: Model,
        model_spec: str,
        data: DataStack,
        database: DatabaseStack,
        tracing: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.model, self.data, self.database, self.tracing = model, data, database, tracing
        self.handlers: dict[str, HandlerFunction] = {}  # construct id -> every function of the engine
        self.consumers: dict[str, Consumer] = {}  # the stream consumers
        self.scheduled: set[str] = set()  # the functions schedules invoke (asynchronously)
        self.schema: CustomResource | None = None  # the migration every SQL function waits for
        self.layer = dependency_layer(self, "Dependencies")
        package = config.package_dir(model_spec)
        versions = migrations.project_versions(model_spec)
        apart = versions if versions and versions.is_dir() and package not in versions.parents else None
        routes = config.setting_list("routes")
        # the model's package first, then any other package the project's routes live in
        packages = list(dict.fromkeys([package, *(config.package_dir(route) for route in routes)]))
        self.trust, bundle = self._root_certificates(packages)
        self.code = function_code(packages, apart, {TRUST_STORE: bundle} if bundle else {})
        self.variables = {f"TABLE_{name.upper()}": table.table_name for name, table in data.tables.items()}
        self.variables |= {"HYBRIDSYNC_MODEL": model_spec} | (
            {"HYBRIDSYNC_ROUTES": ",".join(routes)} if routes else {}
        )
        self.variables |= {"HYBRIDSYNC_MIGRATIONS": PROJECT_MIGRATIONS} if apart else {}
        # what the deploy truth's freshness rule holds the mappings and the drain to
        self.variables["HYBRIDSYNC_FRESHNESS"] = context.freshness(self)
        self.variables |= {f"BUCKET_{name.upper()}": b.bucket_name for name, b in data.buckets.items()}
        self.scheduled_failures = self.failure_queue("ScheduledFailures")  # what schedules fail past retries
        self.failed_batches = self.failure_bucket()

        secrets = {role: secret.secret_arn for role, secret in database.role_secrets.items()}
        users = self.function("Users", name="users", timeout=Duration.minutes(2), role="admin",
                              environment={"DB_ROLE_SECRETS": json.dumps(secrets)})  # fmt: skip
        for secret in database.role_secrets.values():  # it sets each login's password to its secret's
            database.grant_secret_read(secret, users.function)
            if database.cluster is None:  # ... and writes in where an existing database is
                secret.grant_write(users.function)
        # again on each deploy that changes a secret (a rotation is the database's own business)
        logins = self.at_deploy("DatabaseUsers", users, secrets)
        database.rotate_roles(self, after=logins)  # never a rotation of a login not made yet
        migrate = self.function(
            "Migrate",
            name="migrate",
            timeout=Duration.minutes(5),
            role="migrator",
            environment={"MIGRATION_LOCK_TIMEOUT_S": str(self.setting("migration_lock_timeout_s"))},
        )
        migrate.function.node.add_dependency(logins)
        self.migrate = migrate
        self.schema = self.at_deploy(
            "Schema", migrate, {"MigrationsDigest": _digest(migrations.ENGINE_VERSIONS, versions)}
        )
        written_back = {e.table.name for e in model.written_back()}
        if written_back:
            filters = writeback.event_filters(model)
            self.write_back = self.stream_consumer(
                "WriteBack",
                name="write_back",
                role="writer",
                memory_size=1024,
                sources={name: filters for name in sorted(written_back)},
            )
            # a change the stream cannot order against its row is settled from the item itself
            self.write_back.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:BatchGetItem"],
                    resources=[data.tables[name].table_arn for name in sorted(written_back)],
                )
            )
        aggregated = sorted({a.table.name for a in model.aggregates})
        if aggregated:
            # the writer only for its dead letters; the aggregates themselves never touch PostgreSQL
            self.aggregate = self.stream_consumer(
                "Aggregate",
                name="aggregate",
                role="writer",
                batching="aggregate",
                tumbling_window=True,
                sources={name: aggregate.Aggregation(model, name).event_filters() for name in aggregated},
            )
            # The tables themselves, not their indexes (Table.grant would add `<arn>/index/*`).
            self.aggregate.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=[
                        "dynamodb:GetItem",
                        "dynamodb:BatchGetItem",
                        "dynamodb:Query",
                        "dynamodb:UpdateItem",
                        "dynamodb:PutItem",
                        "dynamodb:BatchWriteItem",
                        "dynamodb:DeleteItem",
                    ],  # cursor, journal, aggregates; the changes read from Kinesis folded in
                    resources=[data.tables[name].table_arn for name in aggregated],
                )
            )
        self.api_function()
        if model.bodies:
            self.sweep()
        if model.time_series:
            self.time_series()
        if model.mastered_in(Side.POSTGRESQL):
            self.outbox_drain()
        self.operations_function()

    def _root_certificates(self, packages: list[Path]) -> tuple[str | None, Path | None]:
        """`-c db_root_certificates=global-bundle.pem`: the PEM bundle the functions that reach the
        database straight trust instead of certifi's roots (an RDS instance or cluster presents a
        certificate of the RDS CA: RDS guide, "Using SSL/TLS"); a file of the project (copied into
        the code asset) or of one of its packages. Where it lives in Lambda, and the file to copy."""
        given = context.read(self, "db_root_certificates")
        if not given:
            if self.database.cluster is None:
                raise ValueError(
                    "-c existing_db_secret_arn: the Users step (and every function, without a proxy) "
                    "connects straight to your database with verify-full, and certifi's roots hold no "
                    "RDS CA: download the RDS bundle (RDS guide, 'Using SSL/TLS': global-bundle.pem, or "
                    "your server's CA) next to cdk.json and add -c db_root_certificates=global-bundle.pem"
                )
            return None, None
        if not Path(given).is_absolute() and any((package.parent / given).is_file() for package in packages):
            return f"/var/task/{given}", None  # where Lambda unpacks the code asset (LAMBDA_TASK_ROOT)
        path = Path(given) if Path(given).is_absolute() else (config.project_root() or Path.cwd()) / given
        if not path.is_file() or "-----BEGIN CERTIFICATE-----" not in path.read_text(errors="replace"):
            shipped = ", ".join(p.name for p in packages)
            raise ValueError(
                f"-c db_root_certificates={given}: no PEM bundle there, nor in the packages ({shipped})"
            )
        return f"/var/task/{TRUST_STORE}", path

    def operations_function(self) -> None:
        """Where an operator's work runs in AWS (hybridsync.sync.operations): the loads, the aggregates'
        rebuild, reconcile, redrives and migrations, next to the database. It reads and writes every
        table of the model (loads, repairs, rebuilt aggregates, job checkpoints), reads their
        streams (a rebuild's window, a failed batch's records), pauses the aggregation's mappings,
        reads exports under `exports/` and takes failed batches out of the failure bucket."""
        aggregate = getattr(self, "aggregate", None)
        environment = {
            "FAILED_BATCHES_BUCKET": self.failed_batches.bucket_name,
            "MIGRATE_FUNCTION": self.migrate.function.function_arn,
            # a rebuild leaves the aggregation's mappings as the stack declares them
            "PIPELINE_ENABLED": str(bool(context.read(self, "pipeline_enabled"))).lower(),
        }  # upgrades run as the migrator
        if aggregate is not None:  # its mappings are the alias's
            environment["AGGREGATE_FUNCTION"] = aggregate.alias.function_arn
        streams = self.data.kinesis_streams
        if streams:  # table -> the Kinesis stream its changes are read from (the others: its DynamoDB stream)
            environment["CHANGE_STREAMS"] = self.to_json_string({n: s.stream_arn for n, s in streams.items()})
        ops = self.function(
            "Operations",
            name="operations",
            role="writer",
            timeout=Duration.minutes(15),
            memory_size=1024,
            environment=environment,
        )
        tables = [self.data.tables[name] for name in sorted(self.data.tables)]
        ops.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:DescribeTable",
                    "dynamodb:GetItem",
                    "dynamodb:BatchGetItem",
                    "dynamodb:Query",
                    "dynamodb:Scan",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                    "dynamodb:BatchWriteItem",
                    "dynamodb:ConditionCheckItem",
                ],
                resources=[t.table_arn for t in tables],
            )
        )
        # It reads a table's DynamoDB stream (a rebuild's window, a queued failed batch), whatever the
        # change source: nothing of it reads Kinesis (a Kinesis batch is redriven from the failure
        # bucket's copy), and the data stack keeps exporting every stream ARN, so switching the
        # source never removes an export in use (CloudFormation, Fn::ImportValue).
        for name in sorted(self.data.tables):
            if self.model.table(name).stream is not None:  # a table without one has no StreamArn
                self.data.tables[name].grant_stream_read(ops.function)
        self.migrate.function.grant_invoke(ops.function)
        # failed batches: read, and deleted once redriven
        grant_prefix(
            ops.function,
            self.failed_batches,
            ["s3:GetObject", "s3:DeleteObject"],
            failed.PREFIX,
            listing=True,
        )
        if "bodies" in self.data.buckets:  # exports land under exports/ of the stack's bucket
            self._grant_bodies(ops, ["s3:GetObject"], prefix="exports", listing=True)
        if aggregate is not None:
            mappings = self.format_arn(
                service="lambda",
                resource="event-source-mapping",
                resource_name="*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            ops.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"],
                    resources=[mappings],
                )
            )
            ops.function.add_to_role_policy(  # the Service Authorization Reference: no resource type
                iam.PolicyStatement(actions=["lambda:ListEventSourceMappings"], resources=["*"])
            )
            NagSuppressions.add_resource_suppressions(
                ops.function.role,
                [
                    {
                        "id": "AwsSolutions-IAM5",
                        "reason": "Pausing the aggregation: its mappings' ids are made at "
                        "deploy time, and ListEventSourceMappings takes no resource.",
                        "applies_to": [
                            "Resource::*",
                            {"regex": "/^Resource::arn:.*:event-source-mapping:\\*$/g"},
                        ],
                    }
                ],
                apply_to_children=True,
            )
        CfnOutput(self, "OperationsFunctionName", value=ops.function.function_name)

    def _arn(self, table: Table) -> str:
        return self.data.tables[table.name].table_arn

    def api_function(self) -> None:
        """HTTP API: the project's routes, with item access to every table of entities and each
        declared index by name (a wildcard on every index would grant more), and batch access to
        the large bodies' chunks (a chunks table is read and written in batches only) and objects."""
        dev = str(self.node.try_get_context("dev") or "false").lower() in ("true", "1", "yes")
        self.api = self.function(
            "Api",
            name="api",
            role="reader",
            memory_size=1024,
            timeout=Duration.seconds(15),
            reserved_concurrency=self.setting("api_reserved_concurrency"),
            environment={"API_DOCS_UI": "true"} if dev else None,  # Swagger UI at /docs (-c dev=true)
        )
        # what its page cursors are signed with, shared by its containers (rotating it only ends
        # the cursors given out before)
        generated = secretsmanager.SecretStringGenerator(password_length=64, exclude_punctuation=True)
        cursor_key = secretsmanager.Secret(
            self, "PageCursorKey", encryption_key=customer_key(self), generate_secret_string=generated
        )
        cursor_key.grant_read(self.api.function)
        self.api.function.add_environment("CURSOR_KEY_SECRET_ARN", cursor_key.secret_arn)
        NagSuppressions.add_resource_suppressions(
            cursor_key,
            [{"id": "AwsSolutions-SMG4", "reason": "A signing key, no credential: rotating it only ends the "
              "page cursors given out before; rotate by redeploying with a new construct id."}],
        )  # fmt: skip
        chunks = sorted({b.chunks.table.name for b in self.model.bodies})
        chunk_entities = {b.chunks.name for b in self.model.bodies}
        only_chunks = [t for t in chunks if all(e.name in chunk_entities for e in self.model.all_entities
                                                if e.table.name == t)]  # fmt: skip
        resources = [
            arn
            for table in self.model.tables
            if table.name not in only_chunks
            for arn in (self._arn(table), *(f"{self._arn(table)}/index/{i.name}" for i in table.indexes))
        ]
        self.api.function.add_to_role_policy(iam.PolicyStatement(actions=ITEM_ACTIONS, resources=resources))
        if chunks:
            self.api.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"],
                    resources=[self.data.tables[name].table_arn for name in chunks],
                )
            )
        for bodies in self.model.bodies:
            self._grant_bodies(
                self.api, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], prefix=bodies.object_prefix
            )

    def sweep(self) -> None:
        """Orphaned large bodies (a writer that died between its body and its item): swept daily.
        Schedules invoke asynchronously: what fails past Lambda's retries lands in a queue."""
        sweep = self.function(
            "Sweep",
            name="sweep",
            timeout=Duration.minutes(5),
            dead_letter_queue=self.scheduled_failures,
            environment={"SWEEP_GRACE_S": str(self.setting("sweep_grace_s"))},
        )
        parents = sorted({b.entity.table.name for b in self.model.bodies})
        chunks = sorted({b.chunks.table.name for b in self.model.bodies})
        sweep.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem"], resources=[self.data.tables[n].table_arn for n in parents]
            )
        )
        sweep.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Scan", "dynamodb:BatchWriteItem"],
                resources=[self.data.tables[n].table_arn for n in chunks],
            )
        )
        for bodies in self.model.bodies:
            self._grant_bodies(sweep, ["s3:DeleteObject"], listing=True, prefix=bodies.object_prefix)
        events.Rule(
            self,
            "SweepSchedule",
            schedule=events.Schedule.rate(Duration.hours(self.setting("sweep_hours"))),
            targets=[targets.LambdaFunction(sweep.alias, retry_attempts=2)],
        )

    def outbox_drain(self) -> None:
        """SQL -> DynamoDB: drain the outbox into the tables of the entities mastered in PostgreSQL.
        An EventBridge schedule starts the drain each minute, the finest any schedule runs ("60 second
        precision": EventBridge Scheduler's schedule types). Under freshness=realtime each run then
        polls the outbox every `outbox_poll_ms` until the next run takes over (one at a time: an
        advisory lock; hybridsync.sync.outbox.poll), so a commit waits a poll, not a minute; the
        reserved concurrency leaves room for that next run. Under economy a run drains once."""
        realtime = context.freshness(self) == "realtime"
        period = Duration.minutes(self.setting("outbox_drain_minutes"))
        if realtime and period.to_seconds() + 60 > MAX_TIMEOUT_S:  # a run must outlive its period
            raise ValueError(
                f"-c outbox_drain_minutes={self.setting('outbox_drain_minutes')}: under freshness=realtime a "
                f"run polls until the next one, and Lambda runs at most {MAX_TIMEOUT_S} s: at most 14 minutes"
            )
        self.sql_sync = self.function(
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
            dead_letter_queue=self.scheduled_failures,
            reserved_concurrency=context.by_freshness(self, "sql_sync_reserved_concurrency"),
            environment={"OUTBOX_POLL_MS": str(self.setting("outbox_poll_ms"))} if realtime else None,
        )
        tables = sorted({e.table.name for e in self.model.mastered_in(Side.POSTGRESQL)})
        self.sql_sync.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:PutItem"], resources=[self.data.tables[n].table_arn for n in tables]
            )
        )
        CfnOutput(self, "SqlSyncFunctionName", value=self.sql_sync.function.function_name)
        events.Rule(
            self,
            "SqlSyncSchedule",
            schedule=events.Schedule.rate(period),
            targets=[targets.LambdaFunction(self.sql_sync.alias, retry_attempts=0)],
            enabled=context.read(self, "pipeline_enabled"),  # paused with the mappings
        )

    def at_deploy(self, id: str, handler: HandlerFunction, properties: dict[str, str]) -> CustomResource:
        """Run a function on every deploy that changes `properties` (a custom resource)."""
        provider = cr.Provider(
            self,
            f"{id}Provider",
            on_event_handler=handler.function,
            log_group=logs.LogGroup(self, f"{id}ProviderLogs", retention=context.log_retention(self)),
        )
        resource = CustomResource(self, id, service_token=provider.service_token, properties=properties)
        NagSuppressions.add_resource_suppressions(
            provider,
            [
                {
                    "id": "AwsSolutions-IAM4",
                    "reason": "CDK's custom resource framework uses the "
                    "AWS-maintained basic execution policy for its own logs.",
                },
                {
                    "id": "AwsSolutions-IAM5",
                    "reason": "The framework may invoke every version of the "
                    "one function it serves (`<arn>:*`), nothing else.",
                },
                {
                    "id": "AwsSolutions-L1",
                    "reason": "The framework function's runtime is chosen and updated by aws-cdk-lib.",
                },
            ],
            apply_to_children=True,
        )
        return resource

    def time_series(self) -> None:
        """Pattern 22: the rotation function, on a schedule and at deploy (so today's table exists
        before the first write); it may manage only tables named `<prefix>-<series>-*`."""
        # the stack's own: two stacks of different prefixes never rotate or drop each other's tables
        prefix = self.node.try_get_context("timeseries_prefix") or context.names(self)
        rotate = self.function(
            "Rotate",
            name="rotate",
            timeout=Duration.minutes(15),
            dead_letter_queue=self.scheduled_failures,
            environment={"TIMESERIES_PREFIX": prefix},
        )
        key = customer_key(self)
        if key is not None:  # its tables under the key, as the stacks' own (DynamoDB guide, "Encryption at
            # rest: customer managed key": who creates such a table may describe the key and grant DynamoDB
            # its use)
            rotate.function.add_environment("TIMESERIES_KMS_KEY_ARN", key.key_arn)
            key.grant(rotate.function, "kms:DescribeKey", "kms:CreateGrant", "kms:Decrypt", "kms:Encrypt",
                      "kms:GenerateDataKey*", "kms:ReEncrypt*")  # fmt: skip
        names = [f"{prefix}-{series.table.name}-" for series in self.model.time_series]
        tables = [self.format_arn(service="dynamodb", resource="table", resource_name=f"{n}*") for n in names]
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
        self._grant_bodies(rotate, ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
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
            self,
            "RotateSchedule",
            schedule=events.Schedule.rate(Duration.hours(self.setting("rotate_hours"))),
            targets=[targets.LambdaFunction(rotate.alias, retry_attempts=2)],
        )
        self.at_deploy("TimeSeriesTables", rotate, {"Prefix": prefix})

    def failure_queue(self, id: str) -> sqs.Queue:
        """A queue for what failed past its retries: KMS-encrypted, TLS only, kept 14 days."""
        key = customer_key(self)
        queue = sqs.Queue(
            self,
            id,
            encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.KMS_MANAGED,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        NagSuppressions.add_resource_suppressions(
            queue,
            [{"id": "AwsSolutions-SQS3", "reason": "This queue is itself a dead-letter destination."}],
        )
        return queue

    def failure_bucket(self) -> s3.Bucket:
        """Where the stream mappings store the batches they give up on, records included (output
        `FailedBatchesBucketName`: `hybridsync failed-batches`); expired after `failed_batch_retention_days`,
        and a redrive deletes each batch it applied (a version is kept until then: a batch deleted by
        mistake can be restored)."""
        days = Duration.days(self.setting("failed_batch_retention_days"))
        rule = s3.LifecycleRule(prefix=failed.PREFIX, expiration=days, noncurrent_version_expiration=days)
        return private_bucket(
            self,
            "FailedBatchesBucket",
            [rule],
            dev=context.read(self, "dev"),
            written_by="Written by Lambda's stream mappings and read by the operations function",
        )

    def setting(self, name: str) -> int:
        return int(context.read(self, name))

    def stream_consumer(
        self,
        id: str,
        *,
        name: str,
        sources: dict[str, list[dict]],
        role: str | None = None,
        batching: str = "stream",
        tumbling_window: bool = False,
        **options: object,
    ) -> HandlerFunction:
        """A function's alias fed by the streams of `sources` (table -> the mapping's filters): in
        order per shard (TRIM_HORIZON, one batch per shard at a time), bisect on error, bounded
        retries and age, partial-failure reports, failed batches with their records to the failure
        bucket, the mapping's own metrics; disabled, positions kept, with `-c pipeline_enabled=false`."""
        handler = self.function(id, name=name, role=role, timeout=Duration.minutes(2), **options)
        consumer = self.consumers[id] = Consumer(name, handler)
        for table, filters in sources.items():
            mapping = self._mapping(id, handler, table, filters, batching, tumbling_window)
            consumer.mappings.append((table, mapping))
        return handler

    def _mapping(
        self,
        id: str,
        handler: HandlerFunction,
        table: str,
        filters: list[dict],
        batching: str,
        tumbling_window: bool,
    ) -> str:
        """`handler`'s mapping on `table`'s changes, its DynamoDB stream or its Kinesis stream (through
        an enhanced fan-out consumer of its own, with `kinesis_fan_out`), the same knobs on both; the
        mapping's id."""
        age = self.setting("stream_max_record_age_h")
        if not 1 <= age <= MAX_RECORD_AGE_H:
            raise ValueError(f"-c stream_max_record_age_h={age}: Lambda allows 1 to {MAX_RECORD_AGE_H} hours")
        options: dict[str, Any] = dict(
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=self.setting(f"{batching}_batch_size"),
            # 0 under freshness=realtime: Lambda invokes as soon as a poll finds records, and under
            # load a batch fills itself while the previous one runs (services-ddb-params: "default 0")
            max_batching_window=Duration.seconds(context.by_freshness(self, f"{batching}_batching_window_s")),
            bisect_batch_on_error=True,
            retry_attempts=self.setting("stream_retry_attempts"),
            max_record_age=Duration.hours(age),
            report_batch_item_failures=True,
            parallelization_factor=1,  # keeps one shard's records in order
            on_failure=FailureBucket(self.failed_batches),
            metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
            enabled=context.read(self, "pipeline_enabled"),
            tumbling_window=Duration.seconds(self.setting(f"{batching}_tumbling_window_s"))
            if tumbling_window
            else None,
        )
        stream = self.data.kinesis_streams.get(table)
        if stream is None:
            source = sources.DynamoEventSource(
                self.data.tables[table],
                filters=[lambda_.FilterCriteria.filter(pattern) for pattern in filters],
                **options,
            )
            handler.alias.add_event_source(source)
            return source.event_source_mapping_id
        consumer = None
        if context.read(self, "kinesis_fan_out"):  # 2 MB/s per shard of its own, pushed (Kinesis guide,
            # "Develop enhanced fan-out consumers with dedicated throughput")
            consumer = kinesis.StreamConsumer(self, f"{id}{title(table)}Consumer", stream=stream,
                                              stream_consumer_name=f"{self.stack_name}-{id}")  # fmt: skip
        grant_kinesis_read(handler.function, stream, consumer)
        mapping = handler.alias.add_event_source_mapping(
            f"{title(table)}Changes",
            event_source_arn=consumer.stream_consumer_arn if consumer else stream.stream_arn,
            support_s3_on_failure_destination=True,
            # A Kinesis mapping filters on the record's decoded `data` only: DynamoDB's record is in it
            # (Lambda guide, "Using event filtering with a Kinesis event source")
            filters=[lambda_.FilterCriteria.filter({"data": pattern}) for pattern in filters],
            **options,
        )
        return mapping.event_source_mapping_id

    def _grant_bodies(
        self, handler: HandlerFunction, actions: list[str], *, prefix: str, listing: bool = False
    ) -> None:
        """Object actions on one prefix of the bodies bucket (a `Bodies`'s objects, archives,
        exports), nothing wider."""
        grant_prefix(handler.function, self.data.buckets["bodies"], actions, prefix, listing=listing)

    def function(
        self,
        id: str,
        *,
        name: str,
        role: str | None = None,
        environment: dict[str, str] | None = None,
        **options: Any,
    ) -> HandlerFunction:
        """An engine function with the model, its tables and buckets in its environment; with a
        database `role` (hybridsync.sql.roles), also the database's network and that login."""
        in_vpc = role is not None
        handler = HandlerFunction(
            self,
            id,
            name=name,
            code=self.code,
            layer=self.layer,
            environment={**self.variables, **(environment or {})},
            tracing=self.tracing,
            log_retention=context.log_retention(self),
            vpc=self.database.vpc if in_vpc else None,
            subnets=self.database.subnets if in_vpc else None,
            security_groups=[self.database.client_security_group] if in_vpc else None,
            **options,
        )
        if in_vpc:  # services whose endpoints have no private DNS, by the endpoint's own name
            for key, value in self.database.endpoint_urls.items():
                handler.function.add_environment(key, value)
        if role is not None:
            login = self.database.connect(handler.function, role)
            # RDS Proxy presents a certificate of Amazon's roots (certifi's); a database reached
            # straight, one of the RDS CA: the bundle given (RDS guide, "Using SSL/TLS")
            if self.trust and "DB_IAM_AUTH" not in login:
                handler.function.add_environment("DB_SSLROOTCERT", self.trust)
            for key, value in login.items():
                handler.function.add_environment(key, value)
            if self.schema is not None:  # the schema is migrated before the function that needs it changes
                handler.function.node.add_dependency(self.schema)
        self.handlers[id] = handler
        if (queue := options.get("dead_letter_queue")) is not None:
            self.scheduled.add(id)
            if queue.encryption_master_key is not None:  # the execution role sends its failed events
                # SQS guide, "Key management": a producer needs kms:GenerateDataKey and kms:Decrypt
                queue.encryption_master_key.grant(handler.function, "kms:GenerateDataKey", "kms:Decrypt")
        NagSuppressions.add_resource_suppressions(
            handler.function,
            [
                {
                    "id": "AwsSolutions-L1",
                    "reason": "Runtime pinned to Python 3.12: the dependency layer's "
                    "wheels are built for cp312; move both together.",
                }
            ],
        )
        managed = ["AWSLambdaBasicExecutionRole"] + (["AWSLambdaVPCAccessExecutionRole"] if in_vpc else [])
        NagSuppressions.add_resource_suppressions(
            handler.function.role,
            [
                {
                    "id": "AwsSolutions-IAM4",
                    "reason": "AWS-maintained policies for logs and VPC network "
                    "interfaces only; data access is granted per resource.",
                    "applies_to": [
                        f"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{p}" for p in managed
                    ],
                }
            ],
            apply_to_children=True,
        )
        if self.tracing:
            NagSuppressions.add_resource_suppressions(
                handler.function.role,
                [
                    {
                        "id": "AwsSolutions-IAM5",
                        "reason": "X-Ray trace segments cannot be scoped to a resource.",
                        "applies_to": ["Resource::*"],
                    }
                ],
                apply_to_children=True,
            )
        return handler
