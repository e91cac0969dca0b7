"""A change's identity in the functions' logs (hybridsync.streams.trail) and the trace's order
(hybridsync.sync.trace): what `hybridsync trace` searches by, and how it lines events up."""

from __future__ import annotations

import json
import logging

import pytest

from hybridsync.streams import changes, trail
from hybridsync.sync import trace

pytestmark = pytest.mark.unit


def record(sequence: int, **keys: dict) -> dict:
    return {"eventID": f"e{sequence}", "eventName": "MODIFY", "eventSource": "aws:dynamodb",
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/Main/stream/2026",
            "dynamodb": {"Keys": keys, "SequenceNumber": str(sequence), "NewImage": keys,
                         "ApproximateCreationDateTime": 1796000000}}  # fmt: skip


def test_an_item_is_named_by_its_key_attributes_in_order_whatever_their_type():
    assert trail.item({"SK": {"S": "INFO"}, "PK": {"S": "CUSTOMER#c-1"}}) == "PK=CUSTOMER#c-1,SK=INFO"
    assert trail.item({"PK": {"N": "7"}, "SK": {"B": "AAE="}}) == "PK=7,SK=AAE="
    assert trail.item({"PK": "7", "SK": b"\x00\x01"}) == "PK=7,SK=AAE="  # as a user types it


def test_a_batch_is_logged_a_line_per_hundred_changes_each_with_the_batchs_outcome(caplog):
    batch = changes.read([record(n, PK={"S": f"P#{n}"}, SK={"S": "INFO"}) for n in range(1, 251)])
    logger = logging.getLogger("trail-test")
    with caplog.at_level(logging.INFO, logger="trail-test"):
        trail.log(logger, "changes written back", batch, applied=250)
    lines = [r for r in caplog.records if r.getMessage() == "changes written back"]
    assert [len(r.changes) for r in lines] == [100, 100, 50] and {r.applied for r in lines} == {250}
    first = lines[0].changes[0]
    assert first == {"table": "Main", "item": "PK=P#1,SK=INFO", "event": "MODIFY", "sequence": "1",
                     "created_ms": 1796000000000}  # fmt: skip
    assert "PK=P#1,SK=INFO" in json.dumps(first)  # what the trace's search finds in a line


def test_events_are_ordered_record_by_record_then_by_kind_and_the_row_last():
    events = [
        trace.Event(5.0, "row", {}),
        trace.Event(2.0, "invocation", {"sequence": "10"}),  # read within the second it was stamped
        trace.Event(3.0, "stream_record", {"sequence": "10"}),
        trace.Event(4.0, "dead_letter", {"sequence": "9"}),
        trace.Event(1.0, "stream_record", {"sequence": "9"}),
    ]
    assert [(e.kind, e.detail.get("sequence")) for e in trace.ordered(events)] == [
        ("stream_record", "9"), ("dead_letter", "9"), ("stream_record", "10"), ("invocation", "10"),
        ("row", None),
    ]  # fmt: skip
    assert trace._when("2026-11-30 02:10:00,123+0000") == pytest.approx(1796005800.123)
