"""Data stack: the DynamoDB tables and GSIs, rendered from the model declaration."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
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
