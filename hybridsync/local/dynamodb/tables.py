"""The templates' DynamoDB tables on DynamoDB Local: created as CloudFormation would create them (on
demand), each with its stream, its TTL sweeper (dynamodb/ttl.py) and its Kinesis destination noted
for the Kinesis pump (kinesis/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hybridsync.local import create_table
from hybridsync.local.account import Account
from hybridsync.local.dynamodb.ttl import TtlSweeper
from hybridsync.local.template import Assembly, Resource
from hybridsync.truth import home_replica


def table_name(prefix: str, table: Resource) -> str:
    """`hybridsync-main` for the model's table `main` (the data stack writes the name into the
    table's metadata): stable, so data and `.local/env` carry over."""
    return (
        f"{prefix}-{table.metadata.get('hybridsync:table') or table.construct.removesuffix('Table').lower()}"
    )


def create_request(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """The CreateTable call of a synthesized table (on demand: capacity means nothing locally)."""

    def keys(schema: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{"AttributeName": k["AttributeName"], "KeyType": k["KeyType"]} for k in schema]

    request: dict[str, Any] = {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": keys(properties["KeySchema"]),
        "AttributeDefinitions": properties["AttributeDefinitions"],
    }
    if indexes := properties.get("GlobalSecondaryIndexes"):
        request["GlobalSecondaryIndexes"] = [
            {"IndexName": i["IndexName"], "KeySchema": keys(i["KeySchema"]), "Projection": i["Projection"]}
            for i in indexes
        ]
    if stream := properties.get("StreamSpecification"):
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    return request


@dataclass
class Tables:
    """What the tables' provisioning found, for the services after it."""

    account: Account
    # table -> its KinesisStreamSpecification (its pump reads the table's stream: kinesis/streams.py)
    destinations: dict[str, dict[str, Any]] = field(default_factory=dict)
    sweepers: list[TtlSweeper] = field(default_factory=list)
    partition_keys: dict[str, str] = field(default_factory=dict)  # stream ARN -> its table's partition key

    def provision(self, account: Account, assembly: Assembly) -> None:
        """Every table of the templates that does not exist yet, and what each needs running."""
        tables, client = self, account.client("dynamodb")
        existing = set(client.get_paginator("list_tables").paginate().build_full_result()["TableNames"])
        for table in account.table_resources():
            name = account.tables[table.construct]
            properties = table.properties
            destination = home_replica(properties).get("KinesisStreamSpecification") or (
                properties.get("KinesisStreamSpecification")
            )
            if destination:  # the Kinesis destination's pump reads the table's own stream (kinesis/models.py)
                tables.destinations[table.construct] = destination
                properties = {"StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"}} | properties
            if name not in existing:
                ttl = table.properties.get("TimeToLiveSpecification") or {}
                create_table(
                    client,
                    create_request(name, properties),
                    ttl.get("AttributeName") if ttl.get("Enabled") else None,
                )
            description = client.describe_table(TableName=name)["Table"]
            if destination and "LatestStreamArn" not in description:
                client.update_table(TableName=name, StreamSpecification={
                    "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})  # fmt: skip
                description = client.describe_table(TableName=name)["Table"]
            ttl = table.properties.get("TimeToLiveSpecification") or {}
            if ttl.get("Enabled"):
                keys = [k["AttributeName"] for k in description["KeySchema"]]
                tables.sweepers.append(TtlSweeper(client, name, ttl["AttributeName"], keys, account.expiries))
            if "LatestStreamArn" in description:
                assembly.set(table, StreamArn=description["LatestStreamArn"])
                partition = next(k for k in description["KeySchema"] if k["KeyType"] == "HASH")
                tables.partition_keys[description["LatestStreamArn"]] = partition["AttributeName"]

    def start(self) -> None:
        for sweeper in self.sweepers:
            self.account.spawn(sweeper.run, self.account.stopping, name=f"ttl-{sweeper.table}")
