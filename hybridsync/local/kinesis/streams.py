"""The templates' Kinesis streams and enhanced fan-out consumers on moto server, each table's
streaming destination (its pump, kinesis/models.py), and the pollers of the mappings that read them."""

from __future__ import annotations

import time
from typing import Any

from hybridsync.local.account import Account
from hybridsync.local.awslambda.mappings import ShardPoller
from hybridsync.local.dynamodb.tables import Tables
from hybridsync.local.kinesis.models import (
    CONSUMERS_PER_STREAM,
    ON_DEMAND_SHARDS,
    KinesisShardReader,
    Pump,
    stream_of,
)
from hybridsync.local.template import ACCOUNT, Assembly, TemplateError


class KinesisStreams:
    """Kinesis Data Streams for DynamoDB, locally: each table's destination and its pump."""

    def __init__(self, account: Account, tables: Tables) -> None:
        # each table's destination, as the tables' provisioning found it
        self.account, self.tables = account, tables
        self.client = account.client("kinesis")
        self.pumps: dict[str, Pump] = {}  # Kinesis stream ARN -> the pump that fills it
        self.fresh_streams: set[str] = set()  # Kinesis streams made by this run: saved positions void
        self.mappings: set[str] = set()  # the mappings that read a Kinesis stream

    def start(self) -> None:
        for pump in self.pumps.values():
            self.account.spawn(pump.run, self.account.stopping, name=f"kinesis-{pump.table}")

    def provision(self, account: Account, assembly: Assembly) -> None:
        """The templates' Kinesis streams and enhanced fan-out consumers on moto server, and each
        table's streaming destination (its pump). An on-demand stream gets 4 shards, as AWS starts
        one (Kinesis: "on-demand mode" starts at 4 MB/s write capacity, 4 shards); a stream allows
        20 consumers (Kinesis quotas)."""
        a, client = assembly, self.client
        existing = set(client.list_streams().get("StreamNames", []))
        for stream in a.resources("AWS::Kinesis::Stream"):
            name = a.resolve(stream.stack, {"Ref": stream.logical_id})
            if name not in existing:
                mode = (stream.properties.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED")
                count = (
                    ON_DEMAND_SHARDS if mode == "ON_DEMAND" else int(stream.properties.get("ShardCount", 1))
                )
                client.create_stream(StreamName=name, ShardCount=count)
                self.fresh_streams.add(a.resolve(stream.stack, {"Fn::GetAtt": [stream.logical_id, "Arn"]}))
        consumers: dict[str, list[str]] = {}
        for consumer in a.resources("AWS::Kinesis::StreamConsumer"):
            arn = a.resolve(consumer.stack, {"Fn::GetAtt": [consumer.logical_id, "ConsumerARN"]})
            consumers.setdefault(stream_of(arn), []).append(arn)
            if len(consumers[stream_of(arn)]) > CONSUMERS_PER_STREAM:
                raise TemplateError(f"{consumer.path}: LimitExceededException: a stream has at most "
                                    f"{CONSUMERS_PER_STREAM} enhanced fan-out consumers")  # fmt: skip
            try:
                client.describe_stream_consumer(ConsumerARN=arn)
            except client.exceptions.ResourceNotFoundException:
                client.register_stream_consumer(StreamARN=stream_of(arn), ConsumerName=arn.rpartition("/")[2])
        streams = account.client("dynamodbstreams")
        for table in account.table_resources():
            if (spec := self.tables.destinations.get(table.construct)) is None:
                continue
            target = a.resolve(table.stack, spec["StreamArn"])
            name = account.tables[table.construct]
            source = a.resolve(table.stack, {"Fn::GetAtt": [table.logical_id, "StreamArn"]})
            self.pumps[target] = Pump(
                streams, client, stream_arn=source,
                table=name, kinesis_arn=target, checkpoints=account.checkpoints, mark=account.expiries.mark,
                precision=spec.get("ApproximateCreationDateTimePrecision", "MILLISECOND"),
                start="TRIM_HORIZON" if target in self.fresh_streams else "LATEST",
                faults=account.faults.pump_faults(name) if account.faults else None,
            )  # fmt: skip

    def plan(self, plan: dict[str, Any], source: str, shards: list[str], role_name: str) -> list[ShardPoller]:
        """A mapping on a Kinesis stream or fan-out consumer: a poller per shard, each reading its
        own copy (local/kinesis/models.py). A stream this run made anew holds none of the saved positions."""
        name, stream_arn = plan["settings"].name, stream_of(source)
        self.mappings.add(name)
        pump = self.pumps.get(stream_arn)
        role = f"arn:aws:iam::{ACCOUNT}:role/{role_name}"
        pollers = []
        for shard in shards:
            if stream_arn in self.fresh_streams:
                plan["checkpoints"].forget(name, stream_arn, shard)
            reader = KinesisShardReader(
                self.client, stream_arn, shard, role=role, efo="/consumer/" in source,
                source_through=(lambda pump=pump: pump.read_through) if pump else time.time,
                latest=(lambda pump=pump, shard=shard: pump.latest.get(shard, 0)) if pump else None,
            )  # fmt: skip
            pollers.append(ShardPoller(streams=reader, shard=shard, **(plan | {"stream_arn": stream_arn})))
        return pollers

    def lag(self, name: str, source: str, pollers: list[ShardPoller]) -> int:
        """A mapping's records not delivered yet. A Kinesis mapping's: in its pollers' buffers, in
        its shards unread, and the changes its pump has read and not yet put."""
        pump = self.pumps.get(stream_of(source))
        latest = pump.latest if pump else {}
        pollers = [p for p in pollers if p.settings.name == name]
        return sum(len(p.buffer) + p.reader.backlog(latest) for p in pollers) + (pump.waiting if pump else 0)
