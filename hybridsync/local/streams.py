"""A table's stream read as Lambda's event source mapping delivers it (records in the event shape)."""

from __future__ import annotations

from typing import Any

from hybridsync.records import lambda_record


class StreamReader:
    """Reads a table's stream shard by shard from where it left off, as Lambda would receive it:
    each record in the event shape (`eventSourceARN`, epoch times, base64 binary)."""

    def __init__(self, streams: Any, stream_arn: str, start: str = "LATEST"):
        self.streams = streams
        self.stream_arn = stream_arn
        self.start = start
        self.iterators: dict[str, str | None] = {}

    def _shards(self) -> list[str]:
        description = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        return [shard["ShardId"] for shard in description["Shards"]]

    @property
    def shard(self) -> str:
        """The stream's only shard (moto keeps one per table), as Lambda names it in a
        tumbling-window event's `shardId`."""
        (only,) = self._shards()
        return only

    def read(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for shard in self._shards():
            if shard not in self.iterators:
                self.iterators[shard] = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard, ShardIteratorType=self.start
                )["ShardIterator"]
            while iterator := self.iterators[shard]:
                page = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                self.iterators[shard] = page.get("NextShardIterator")
                records += [lambda_record(r, self.stream_arn) for r in page["Records"]]
                if not page["Records"]:
                    break
        return records
