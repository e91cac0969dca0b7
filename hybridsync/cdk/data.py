"""Data stack: the model's DynamoDB tables, GSIs and streams, rendered from its declaration, and
(when it declares large bodies or time series) the bucket of the largest bodies and archives."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync.model.declare import KeyAttribute, Model, Projection, StreamView, Table
from hybridsync.truth import context

_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}
_PROJECTIONS = {
    Projection.ALL: dynamodb.ProjectionType.ALL,
    Projection.KEYS_ONLY: dynamodb.ProjectionType.KEYS_ONLY,
    Projection.INCLUDE: dynamodb.ProjectionType.INCLUDE,
}
_STREAMS = {StreamView.NEW_AND_OLD_IMAGES: dynamodb.StreamViewType.NEW_AND_OLD_IMAGES}


def _attribute(key: KeyAttribute | None) -> dynamodb.Attribute | None:
    return dynamodb.Attribute(name=key.name, type=_TYPES[key.type]) if key else None


TABLE_METADATA = "hybridsync:table"


def customer_key(scope: Construct) -> kms.IKey | None:
    """The customer-managed key of `-c kms_key_arn=`, imported into the stack of `scope`; None: the
    AWS-managed keys."""
    arn = context.read(scope, "kms_key_arn")
    stack = Stack.of(scope)
    found = stack.node.try_find_child("CustomerKey")
    return found or (kms.Key.from_key_arn(stack, "CustomerKey", arn) if arn else None)  # type: ignore[return-value]


def request_units(scope: Construct, setting: str) -> dict[str, int]:
    """An on-demand maximum setting (`max_read_request_units`): "N" for every table and GSI ("*"),
    or `table=N,table/index=N`; a GSI without its own takes its table's."""
    value = str(context.read(scope, setting) or "").strip()
    if not value:
        return {}
    if value.isdigit():
        return {"*": int(value)}
    limits = {}
    for part in value.split(","):
        name, _, units = part.partition("=")
        if not units.strip().isdigit():
            raise ValueError(f"-c {setting}={value}: each part is `table=N` or `table/index=N`")
        limits[name.strip()] = int(units)
    return limits


def private_bucket(
    scope: Construct, id: str, lifecycle_rules: list[s3.LifecycleRule], *, dev: bool, written_by: str
) -> s3.Bucket:
    """A bucket of the stack's own: private, encrypted, TLS only, versioned, kept when the stack goes
    (unless `dev`), its name a stack output `<id>Name`; `written_by`: who reads and writes it, the
    reason it has no server access log (CloudTrail data events can log those calls)."""
    key = customer_key(scope)
    bucket = s3.Bucket(
        scope,
        id,
        encryption=s3.BucketEncryption.KMS if key else s3.BucketEncryption.S3_MANAGED,
        encryption_key=key,
        bucket_key_enabled=bool(key),
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        versioned=True,
        lifecycle_rules=lifecycle_rules,
        removal_policy=RemovalPolicy.DESTROY if dev else RemovalPolicy.RETAIN,
    )
    CfnOutput(scope, f"{id}Name", value=bucket.bucket_name)
    NagSuppressions.add_resource_suppressions(
        bucket,
        [{"id": "AwsSolutions-S1", "reason": f"{written_by}, whose calls CloudTrail data events can log; "
          "no server access log bucket."}],
    )  # fmt: skip
    return bucket


class ChangeStreams(dict[str, "kinesis.Stream"]):
    """The Kinesis change streams by table; a table without one is named with what would give it one
    (an app.py reaching for it, docs/deploying.md: "Your own consumer of a table's changes")."""

    def __missing__(self, table: str) -> kinesis.Stream:
        raise KeyError(
            f"table {table!r} has no Kinesis change stream: it reads its DynamoDB stream. Synthesize "
            f'with -c change_source=kinesis, or declare it with change_source="kinesis" '
            f"(tables with one: {', '.join(sorted(self)) or 'none'})"
        )


def title(name: str) -> str:
    """A table's name in construct ids and outputs: `main` -> `Main`, `order-lines` -> `OrderLines`."""
    return "".join(part.title() for part in name.replace("_", "-").split("-"))


class DataStack(Stack):
    """One TableV2 per declared table: on-demand, PITR, KMS encryption, TTL, deletion protection."""

    def __init__(self, scope: Construct, id: str, *, model: Model, dev: bool = False, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self._dev = dev
        self.tables: dict[str, dynamodb.TableV2] = {}
        self.kinesis_streams = ChangeStreams()  # table -> its change stream (kinesis tables)
        known = {
            "*",
            *(t.name for t in model.tables),
            *(f"{t.name}/{i.name}" for t in model.tables for i in t.indexes),
        }
        for setting in ("max_read_request_units", "max_write_request_units"):
            if unknown := sorted(set(request_units(self, setting)) - known):
                raise ValueError(f"-c {setting}: the model has no table or index {', '.join(unknown)} "
                                 f"(its: {', '.join(sorted(known - {'*'}))})")  # fmt: skip
        for table in model.tables:
            if table.stream and context.change_source(self, table) == "kinesis":
                self.kinesis_streams[table.name] = self._change_stream(table)
            self.tables[table.name] = self._render(table, dev)
            # the local app names its tables by the model's names (`<prefix>-<name>`), read from here
            self.tables[table.name].node.default_child.add_metadata(TABLE_METADATA, table.name)  # type: ignore[union-attr]
            named = title(table.name)
            CfnOutput(self, f"{named}TableName", value=self.tables[table.name].table_name)
            if table.stream:
                CfnOutput(
                    self, f"{named}TableStreamArn", value=self.tables[table.name].table_stream_arn or ""
                )
            if stream := self.kinesis_streams.get(table.name):
                CfnOutput(self, f"{named}ChangeStreamArn", value=stream.stream_arn)
        self.buckets: dict[str, s3.Bucket] = {}
        if model.bodies or model.time_series:
            self.buckets["bodies"] = self._bucket()

    def _bucket(self) -> s3.Bucket:
        """The largest bodies (pattern 18) and time-series archives (pattern 22), versioned so an
        overwrite or a sweep can be undone; old versions expire after 30 days."""
        rule = s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30),
                                abort_incomplete_multipart_upload_after=Duration.days(1))  # fmt: skip
        by = "Bodies and archives are read and written only by the engine's functions"
        return private_bucket(self, "BodiesBucket", [rule], dev=self._dev, written_by=by)

    def _change_stream(self, table: Table) -> kinesis.Stream:
        """Kinesis Data Streams for DynamoDB: the stream the table's changes are copied to (on demand,
        or `kinesis_shards` provisioned), kept `kinesis_retention_h`, under the customer key if any.
        DynamoDB writes to it with its service-linked role, whose policy holds kms:GenerateDataKey via
        Kinesis (DynamoDBKinesisReplicationServiceRolePolicy): the key's policy must let IAM policies
        grant it, as it must for every key of `-c kms_key_arn` (Kinesis guide, "Permissions to use
        user-generated KMS keys")."""
        shards = context.read(self, "kinesis_shards")
        hours = int(context.read(self, "kinesis_retention_h"))
        if not 24 <= hours <= 8760:  # Kinesis guide, "Change the data retention period"
            raise ValueError(f"-c kinesis_retention_h={hours}: a Kinesis stream keeps 24 to 8760 hours")
        key = customer_key(self)
        stream = kinesis.Stream(
            self,
            f"{title(table.name)}ChangeStream",
            stream_mode=kinesis.StreamMode.PROVISIONED if shards else kinesis.StreamMode.ON_DEMAND,
            shard_count=int(shards) if shards else None,
            retention_period=Duration.hours(hours),
            encryption=kinesis.StreamEncryption.KMS if key else kinesis.StreamEncryption.MANAGED,
            encryption_key=key,
            # a copy of the table's changes: kept past the stack, it would bill by the hour unwritten
            removal_policy=RemovalPolicy.DESTROY,
        )
        # the local app names the stream by the table it carries, as it names the tables
        stream.node.default_child.add_metadata(TABLE_METADATA, table.name)  # type: ignore[union-attr]
        return stream

    def _render(self, table: Table, dev: bool) -> dynamodb.TableV2:
        key = customer_key(self)
        reads, writes = (
            request_units(self, "max_read_request_units"),
            request_units(self, "max_write_request_units"),
        )

        def most(limits: dict[str, int], index: str | None = None) -> int | None:
            named = [f"{table.name}/{index}"] if index else []
            return next((limits[n] for n in (*named, table.name, "*") if n in limits), None)

        changes = self.kinesis_streams.get(table.name)
        replicas = context.replicas(self, table)
        rendered = dynamodb.TableV2(
            self,
            f"{title(table.name)}Table",
            partition_key=_attribute(table.partition),
            sort_key=_attribute(table.sort),
            billing=dynamodb.Billing.on_demand(
                max_read_request_units=most(reads), max_write_request_units=most(writes)
            ),
            # Kept with a Kinesis change source: nothing reads it then (no mapping, no grant), an unread
            # stream costs nothing, and the table (and the local app, which replays it) stays as it was
            dynamo_stream=_STREAMS[table.stream] if table.stream else None,
            kinesis_stream=changes,
            time_to_live_attribute=table.ttl_attribute,  # a global table's: every replica's
            # MREC (the default mode): each replica its own stream, carrying every write it applies
            replicas=[dynamodb.ReplicaTableProps(region=region) for region in replicas] or None,
            encryption=dynamodb.TableEncryptionV2.customer_managed_key(key)
            if key
            else dynamodb.TableEncryptionV2.aws_managed_key(),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # Data is protected unless the deployment says it is a throw-away dev stack.
            deletion_protection=not dev,
            removal_policy=RemovalPolicy.DESTROY if dev else RemovalPolicy.RETAIN,
            global_secondary_indexes=[
                dynamodb.GlobalSecondaryIndexPropsV2(
                    index_name=index.name,
                    partition_key=_attribute(index.partition),
                    sort_key=_attribute(index.sort),
                    projection_type=_PROJECTIONS[index.projection],
                    non_key_attributes=list(index.non_key_attributes) or None,
                    max_read_request_units=most(reads, index.name),
                    max_write_request_units=most(writes, index.name),
                )
                for index in table.indexes
            ]
            or None,
        )
        if changes is not None:  # TableV2 has no precision; the engine orders a key's changes by it
            # (EnableKinesisStreamingConfiguration: ApproximateCreationDateTimePrecision). The home
            # replica's, which TableV2 renders after the others
            rendered.node.default_child.add_property_override(  # type: ignore[union-attr]
                f"Replicas.{len(replicas)}.KinesisStreamSpecification.ApproximateCreationDateTimePrecision",
                "MICROSECOND",
            )
        return rendered
