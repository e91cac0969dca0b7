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

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from aws_cdk import custom_resources as cr
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync.cdk.assets import (
    PROJECT_MIGRATIONS,
    TRUST_STORE,
    HandlerFunction,
    dependency_layer,
    function_code,
    suppress_function_findings,
)
from hybridsync.cdk.data import DataStack, customer_key, private_bucket
from hybridsync.cdk.database import DatabaseStack
from hybridsync.cdk.grants import ITEM_ACTIONS, grant_prefix
from hybridsync.cdk.mappings import change_mapping
from hybridsync.cdk.operations import add_operations_function
from hybridsync.cdk.schedules import add_outbox_drain, add_sweep, add_time_series
from hybridsync.model import config
from hybridsync.model.declare import Model, Side, Table
from hybridsync.sql import migrations
from hybridsync.sync import aggregate, failed, writeback
from hybridsync.truth import context

AGGREGATION = "Aggregate"  # the aggregation's construct id (its mappings follow `folding`)


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


class PipelineStack(Stack):
    MIGRATE_TIMEOUT = Duration.minutes(5)

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
        self.model, self.tracing = model, tracing
        self.data, self.database = self.sources(data, database)
        # the mappings and the drain schedule: one Region's consume (home's, or since a deployed
        # failover a standby's: cdk/standby.py)
        self.enabled = bool(context.read(self, "pipeline_enabled")) and self.consuming()
        self.folding = self.enabled and self.rebuilt()  # the aggregation's mappings
        self.handlers: dict[str, HandlerFunction] = {}  # construct id -> every function of the engine
        self.consumers: dict[str, Consumer] = {}  # the stream consumers
        self.scheduled: set[str] = set()  # the functions schedules invoke (asynchronously)
        self.schema: CustomResource | None = None  # the migration every SQL function waits for
        self.layer = dependency_layer(self, "Dependencies")
        versions = self._code_and_variables(model_spec)
        self.scheduled_failures = self.failure_queue("ScheduledFailures")  # what schedules fail past retries
        self.failed_batches = self.failure_bucket()
        self._logins_and_schema(versions)
        self._write_back()
        self._aggregation()
        self.api_function()
        self.scheduled_work()
        if model.mastered_in(Side.POSTGRESQL):
            self.sql_sync = add_outbox_drain(self)
        add_operations_function(self)

    def consuming(self) -> bool:
        """Home consumes unless a deployed failover made a standby active."""
        return context.active_standby(self) is None

    def rebuilt(self) -> bool:
        """Whether its aggregates are counted from its own stream (a standby's: once rebuilt)."""
        return True

    def sources(self, data: DataStack, database: DatabaseStack) -> tuple[DataStack, DatabaseStack]:
        """The tables and the database the functions use: home's stacks."""
        return data, database

    def scheduled_work(self) -> None:
        """The sweep of orphaned large bodies and the time series' rotation, as the model needs them."""
        if self.model.bodies:
            add_sweep(self)
        if self.model.time_series:
            add_time_series(self)

    def migrate_environment(self) -> dict[str, str]:
        return {"MIGRATION_LOCK_TIMEOUT_S": str(self.setting("migration_lock_timeout_s"))}

    def _code_and_variables(self, model_spec: str) -> Path | None:
        """The code asset (the model's package and the routes', the CA bundle) and the variables
        every function gets; the project's revisions folder, if any."""
        data = self.data
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
        return versions

    def _logins_and_schema(self, versions: Path | None) -> None:
        """The Users step (each role's login, at deploy), then the schema's migration, which every
        function that needs the schema waits for."""
        database = self.database
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
        migrate = self.function("Migrate", name="migrate", timeout=self.MIGRATE_TIMEOUT, role="migrator",
                                environment=self.migrate_environment())  # fmt: skip
        migrate.function.node.add_dependency(logins)
        self.migrate = migrate
        self.schema = self.at_deploy(
            "Schema", migrate, {"MigrationsDigest": _digest(migrations.ENGINE_VERSIONS, versions)}
        )

    def _write_back(self) -> None:
        """DynamoDB -> PostgreSQL: the write-back consumer of every written-back table's changes."""
        written_back = {e.table.name for e in self.model.written_back()}
        if written_back:
            filters = writeback.event_filters(self.model)
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
                    resources=[self.data.tables[name].table_arn for name in sorted(written_back)],
                )
            )

    def _aggregation(self) -> None:
        """The declared aggregates' consumer, in tumbling windows."""
        aggregated = sorted({a.table.name for a in self.model.aggregates})
        if aggregated:
            # the writer only for its dead letters; the aggregates themselves never touch PostgreSQL
            self.aggregate = self.stream_consumer(
                AGGREGATION,
                name="aggregate",
                role="writer",
                batching="aggregate",
                tumbling_window=True,
                sources={
                    name: aggregate.Aggregation(self.model, name).event_filters() for name in aggregated
                },
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
                    resources=[self.data.tables[name].table_arn for name in aggregated],
                )
            )

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
            self.grant_bodies(
                self.api, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], prefix=bodies.object_prefix
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
            mapping = change_mapping(self, id, handler, table, filters, batching, tumbling_window,
                                     enabled=self.folding if id == AGGREGATION else self.enabled)  # fmt: skip
            consumer.mappings.append((table, mapping))
        return handler

    def grant_bodies(
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
        suppress_function_findings(handler, in_vpc=in_vpc, tracing=self.tracing)
        return handler
