"""How the rebuild reads a stream (hybridsync/sync/rebuild.py), on a stub of the Streams API: past
the empty pages a trimmed stretch gives ("it might take multiple calls to get to a portion of the
shard that contains stream records": GetRecords), to an open shard's end at the present, and each
shard after its parent."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from hybridsync.sync import rebuild

pytestmark = pytest.mark.unit


class Streams:
    """One open shard's pages, served in order, then empty pages (nothing written since)."""

    def __init__(self, pages: list[list[dict]], shards: list[dict] | None = None):
        self.pages, self.shards, self.calls = pages, shards or [], 0

    def get_shard_iterator(self, **_):
        return {"ShardIterator": "0"}

    def get_records(self, ShardIterator: str, Limit: int):
        self.calls += 1
        n = int(ShardIterator)
        return {"Records": self.pages[n] if n < len(self.pages) else [], "NextShardIterator": str(n + 1)}

    def describe_stream(self, **request):
        return {"StreamDescription": {"Shards": self.shards}}


def record(sequence: int, at: float) -> dict:
    return {
        "dynamodb": {
            "SequenceNumber": str(sequence),
            "ApproximateCreationDateTime": datetime.fromtimestamp(at, UTC),
        }
    }


def test_a_trimmed_stretch_of_empty_pages_is_read_past():
    old = time.time() - 3600
    streams = Streams([[], [], [], [record(7, old)], [record(8, time.time())], []])
    read = [r["dynamodb"]["SequenceNumber"] for r in rebuild._records_after(streams, "arn", "s", None)]
    assert read == ["7", "8"]
    assert streams.calls == 6  # the empty page after a record of the present is the end


def test_an_open_shard_whose_last_record_is_old_ends_after_enough_empty_pages():
    streams = Streams([[record(7, time.time() - 3600)]])
    assert len(list(rebuild._records_after(streams, "arn", "s", None))) == 1
    assert streams.calls == 1 + rebuild.EMPTY_PAGES


def test_shards_come_each_after_its_parent():
    listed = [{"ShardId": "c", "ParentShardId": "b"}, {"ShardId": "a"},
              {"ShardId": "b", "ParentShardId": "a"}, {"ShardId": "d", "ParentShardId": "gone"}]  # fmt: skip
    assert rebuild._shards(Streams([], listed), "arn") == ["a", "b", "c", "d"]
