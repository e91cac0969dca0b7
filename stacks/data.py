"""Data stack: the DynamoDB tables and GSIs, rendered from the model declaration, and the bucket of
the largest review bodies."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync.model import MODEL, KeyAttribute, Model, Projection, StreamView, Table

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


class DataStack(Stack):
    """One TableV2 per declared table: on-demand, PITR, KMS encryption, TTL, deletion protection."""

    def __init__(
        self, scope: Construct, id: str, *, dev: bool = False, model: Model = MODEL, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.tables: dict[str, dynamodb.TableV2] = {}
        for table in model.tables:
            self.tables[table.name] = self._render(table, dev)
            CfnOutput(self, f"{table.name.title()}TableName", value=self.tables[table.name].table_name)
        main = self.tables["main"]
        CfnOutput(self, "MainTableStreamArn", value=main.table_stream_arn or "")
        # The largest review bodies (pattern 18): private, encrypted, TLS only, versioned so an
        # overwrite or a sweep can be undone; old versions expire after 30 days.
        self.bodies = s3.Bucket(
            self,
            "BodiesBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30),
                                              abort_incomplete_multipart_upload_after=Duration.days(1))],
            removal_policy=RemovalPolicy.DESTROY if dev else RemovalPolicy.RETAIN,
            auto_delete_objects=False,
        )  # fmt: skip
        self.buckets = {"bodies": self.bodies}
        CfnOutput(self, "BodiesBucketName", value=self.bodies.bucket_name)
        NagSuppressions.add_resource_suppressions(
            self.bodies,
            [{"id": "AwsSolutions-S1", "reason": "Review bodies are read and written only by the API "
              "function, whose calls CloudTrail data events can log; no server access log bucket."}],
        )  # fmt: skip

    def _render(self, table: Table, dev: bool) -> dynamodb.TableV2:
        return dynamodb.TableV2(
            self,
            f"{table.name.title()}Table",
            partition_key=_attribute(table.partition),
            sort_key=_attribute(table.sort),
            billing=dynamodb.Billing.on_demand(),
            dynamo_stream=_STREAMS[table.stream] if table.stream else None,
            time_to_live_attribute=table.ttl_attribute,
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
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
                )
                for index in table.indexes
            ]
            or None,
        )
