"""The seam for change records (`hybridsync.streams.changes`): one registry of sources, each
reading a record once into a typed change; the consumers read a batch once and work on that."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from hybridsync.streams import changes
from hybridsync.streams.changes import Batch, StreamChange
from hybridsync.streams.records import DeadLetter, table_of_arn
from hybridsync.sync import writeback
from hybridsync.sync.aggregate import Aggregation
from shop.model import MODEL
from tests import events
from tests.handlers import cold_start

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
STREAM = "arn:aws:kinesis:us-east-1:000000000000:stream/hybridsync-main-changes"
MICROS = 1_795_000_000_000_007


def as_kinesis(record: dict[str, Any], sequence: int = 49_600_000_000_000_000_001) -> dict[str, Any]:
    """A DynamoDB stream record as Kinesis Data Streams for DynamoDB delivers it (kds.html)."""
    dynamodb = {k: v for k, v in record["dynamodb"].items() if k not in ("SequenceNumber", "StreamViewType")}
    data = {"eventID": record["eventID"], "eventName": record["eventName"], "eventSource": "aws:dynamodb",
            "userIdentity": record.get("userIdentity"), "recordFormat": "application/json",
            "tableName": table_of_arn(record["eventSourceARN"]),
            "dynamodb": dynamodb | {"ApproximateCreationDateTime": MICROS}}  # fmt: skip
    return {"eventSource": "aws:kinesis", "eventID": f"shardId-000000000000:{sequence}",
            "eventSourceARN": STREAM, "kinesis": {"sequenceNumber": str(sequence), "partitionKey": "A" * 32,
                        "data": base64.b64encode(json.dumps(data).encode()).decode()}}  # fmt: skip


def test_each_source_is_one_entry_named_by_its_event_source():
    assert set(changes.SOURCES) == {"aws:dynamodb", "aws:kinesis"}
    for name, source in changes.SOURCES.items():
        assert source.event_source == name
        assert source.promises.cite.startswith("https://docs.aws.amazon.com/")
    # DynamoDB Streams: in order, once (Streams.html); Kinesis: neither (kds.html)
    assert changes.DYNAMODB_STREAMS.promises.in_order and changes.DYNAMODB_STREAMS.promises.once
    assert not changes.KINESIS.promises.in_order and not changes.KINESIS.promises.once
    # Kinesis's positions above every DynamoDB stream's slot
    assert changes.KINESIS.positions_from == changes.SLOTS * changes.SLOT_WIDTH


def test_a_dynamodb_stream_record_is_read_once_into_its_change():
    record = events.record("order_line_insert")
    change = changes.read_one(record)
    assert change.source is changes.DYNAMODB_STREAMS
    assert change.record is record  # kept as delivered, for dead letters and failed batches
    assert change.event == "INSERT" and change.has_data and not change.ttl_expiry
    assert change.keys == record["dynamodb"]["Keys"] and change.new_image == record["dynamodb"]["NewImage"]
    sequence = int(record["dynamodb"]["SequenceNumber"])
    assert change.sequence == sequence  # its place in its shard; its position, in its stream's slot:
    assert change.position == changes.slot(record["eventSourceARN"]) * changes.SLOT_WIDTH + sequence
    assert change.identity == record["eventID"] and change.change_id is None
    assert change.table == table_of_arn(record["eventSourceARN"])
    assert changes.read_one(events.record("order_remove_ttl_expiry")).ttl_expiry


def test_two_streams_positions_are_never_compared():
    """Each replica of a global table has its own stream, numbered on its own: a position carries
    its stream's slot, so a row written from one stream is settled from the item when another's
    record comes (writeback._band), not compared."""
    home = events.record("order_line_insert")
    west = home | {"eventSourceARN": home["eventSourceARN"].rsplit("/", 1)[0] + "/2031-01-01T00:00:00.000"}
    west["dynamodb"] = home["dynamodb"] | {"SequenceNumber": "1"}  # west's stream numbers its own
    first, second = changes.read_one(home), changes.read_one(west)
    assert changes.band(first.position) != changes.band(second.position)
    assert 0 < changes.slot(home["eventSourceARN"]) < changes.SLOTS
    assert changes.slot(home["eventSourceARN"]) == changes.slot(str(home["eventSourceARN"]))  # stable
    assert changes.slot(None) == 0  # a record naming no stream: the slot positions had before slots
    assert changes.band(first.position) < changes.band(changes.KINESIS.positions_from)
    # the API allows up to 40 digits: one past the slot takes no position (settled from the item)
    home["dynamodb"]["SequenceNumber"] = "9" * 33
    assert changes.read_one(home).position is None and changes.read_one(home).sequence == int("9" * 33)


def test_a_kinesis_record_is_read_into_the_same_change_with_its_sources_position_and_identity():
    plain = events.record("order_line_insert")
    change = changes.read_one(as_kinesis(plain))
    assert change.source is changes.KINESIS
    assert (change.event, change.keys, change.new_image) == ("INSERT", plain["dynamodb"]["Keys"],
                                                             plain["dynamodb"]["NewImage"])  # fmt: skip
    assert change.table == table_of_arn(plain["eventSourceARN"])
    assert change.sequence == 49_600_000_000_000_000_001  # its place in the Kinesis shard
    assert change.position == changes.KINESIS.positions_from + MICROS
    assert changes.band(change.position) != changes.band(changes.read_one(plain).position)
    assert change.created_micros == MICROS
    # every copy of the change is one change: one identity, whatever its Kinesis sequence number
    copy = changes.read_one(as_kinesis(plain, sequence=49_600_000_000_000_000_999))
    assert copy.identity == change.identity == f"kinesis:{change.change_id}" and change.change_id
    # a dead letter stores the read record: read again (a redrive), it is the same change
    again = changes.read_one(change.record)
    assert again.source is changes.KINESIS and again.record is change.record
    assert (again.position, again.identity) == (change.position, change.identity)


def test_a_record_that_carries_no_change_is_a_dead_letter_of_the_batch():
    bad = as_kinesis(events.record("order_insert"))
    bad["kinesis"]["data"] = base64.b64encode(b"not json").decode()
    batch = changes.read([bad, events.record("order_insert")])
    assert len(batch) == 2
    letter, good = batch.items
    assert isinstance(letter, DeadLetter) and letter.record is bad and "not JSON" in letter.reason
    assert isinstance(good, StreamChange)
    assert changes.read(batch) is batch  # a batch read already is not read again


def test_a_batch_names_its_table_and_freshness_from_its_first_change():
    plain = events.record("order_insert")
    assert changes.read([plain]).table_arn("stream-arn") == "stream-arn"  # a DynamoDB stream names it
    read = changes.read([as_kinesis(plain)])
    assert read.table_arn(STREAM).endswith(f":table/{table_of_arn(plain['eventSourceARN'])}")
    assert read.freshness_ms(MICROS / 1_000_000 + 2) == pytest.approx(2000)
    assert changes.read([]).freshness_ms(0) is None


def test_a_batch_written_back_or_aggregated_is_read_once(monkeypatch):
    """A stream change makes one trip into streams/: the batch is read once, then the consumers
    work on the typed changes."""
    reads: list[str] = []
    read_one = changes.read_one

    def counted(record: dict[str, Any]) -> StreamChange:
        reads.append(record["eventID"])
        return read_one(record)

    monkeypatch.setattr(changes, "read_one", counted)
    records = [events.record(n) for n in ("order_insert", "order_line_insert", "order_remove")]
    batch = changes.read(records)
    assert reads == [r["eventID"] for r in records]
    writeback.triage(batch, MODEL)
    aggregation = Aggregation(MODEL)
    aggregation._triage(batch)
    assert [writeback.decode(c, MODEL) is not None for c in batch if isinstance(c, StreamChange)]
    assert reads == [r["eventID"] for r in records]  # none read again
    assert isinstance(batch, Batch)


def test_the_kinesis_reader_is_imported_only_when_a_kinesis_record_arrives():
    """The seam imports a source's reader with its first record: a DynamoDB stream's consumers
    never load Kinesis decoding at cold start."""
    printed = cold_start(
        "import hybridsync.functions.write_back, hybridsync.functions.aggregate\n"
        "from hybridsync.streams import changes\n"
        "before = 'hybridsync.streams.kinesis' in sys.modules\n"
        "changes.read([{'eventSource': 'aws:kinesis', 'kinesis': {'data': ''}}])\n"
        "print(before, 'hybridsync.streams.kinesis' in sys.modules)"
    )
    assert printed.split() == ["False", "True"]


def test_a_failed_batch_is_named_by_its_sources_section_and_read_back_only_where_it_can_be():
    info = {"streamArn": STREAM, "shardId": "shardId-000000000000"}
    assert changes.batch_info({"KinesisBatchInfo": info}) == info
    assert changes.batch_info({"DDBStreamBatchInfo": info}) == info
    with pytest.raises(KeyError):
        changes.batch_info({"requestContext": {}})
    assert changes.source_of_stream(STREAM) is changes.KINESIS and not changes.KINESIS.read_back
    table_stream = events.record("order_insert")["eventSourceARN"]
    assert changes.source_of_stream(table_stream) is changes.DYNAMODB_STREAMS
    assert changes.DYNAMODB_STREAMS.read_back
