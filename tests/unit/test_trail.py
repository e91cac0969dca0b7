"""A change's identity in the functions' logs (hybridsync.streams.trail) and the trace's order
(hybridsync.sync.trace): what `hybridsync trace` searches by, and how it lines events up."""

from __future__ import annotations

import dataclasses
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
    assert trail.item({"PK": {"N": "7"}, "SK": {"B": "AAE="}}) == "PK=7,SK=AAE\\="  # `=` escaped
    assert trail.item({"PK": "7", "SK": b"\x00\x01"}) == "PK=7,SK=AAE\\="  # as a user types it
    # no two items share a name, whatever their values hold
    assert trail.item({"PK": "a,SK=b", "SK": "c"}) != trail.item({"PK": "a", "SK": "b,SK=c"})


def test_a_key_as_typed_is_named_as_the_stream_names_it():
    from shop.model import MODEL

    assert trace.typed(MODEL, "main", {"PK": "P#1", "SK": "INFO"}) == {
        "PK": ("S", "P#1"),
        "SK": ("S", "INFO"),
    }
    with pytest.raises(ValueError, match="main's key is PK, SK"):
        trace.typed(MODEL, "main", {"PK": "P#1"})


def test_a_batch_is_logged_a_line_per_hundred_changes_each_with_the_batchs_outcome(caplog):
    batch = changes.read([record(n, PK={"S": f"P#{n}"}, SK={"S": "INFO"}) for n in range(1, 251)])
    logger = logging.getLogger("trail-test")
    with caplog.at_level(logging.INFO, logger="trail-test"):
        trail.log(logger, "changes written back", batch, applied=250)
    lines = [r for r in caplog.records if r.getMessage() == "changes written back"]
    assert [len(r.changes) for r in lines] == [100, 100, 50] and {r.applied for r in lines} == {250}
    first = lines[0].changes[0]
    assert (lines[0].table, lines[0].stream) == ("Main", "2026")  # a batch is one shard's
    assert first == {
        "item": "PK=P#1,SK=INFO",
        "event": "MODIFY",
        "sequence": "1",
        "created_ms": 1796000000000,
    }
    with caplog.at_level(logging.WARNING, logger="trail-test"):  # INFO off: nothing built, nothing said
        trail.log(logger, "changes written back", batch, applied=250)
    assert len([r for r in caplog.records if r.getMessage() == "changes written back"]) == 3
    assert "PK=P#1,SK=INFO" in json.dumps(first)  # what the trace's search finds in a line


def test_events_are_ordered_record_by_record_then_by_kind_and_the_row_last():
    events = [
        trace.Event(0.5, "outbox", {"outbox": 3}),  # of no record: before the first read after it
        trace.Event(0.8, "put", {"outbox": 3}),
        trace.Event(5.0, "row", {}),
        trace.Event(2.0, "invocation", {"sequence": "10"}),  # read within the second it was stamped
        trace.Event(3.0, "stream_record", {"sequence": "10"}),
        trace.Event(4.0, "dead_letter", {"sequence": "9"}),
        trace.Event(1.0, "stream_record", {"sequence": "9"}),
    ]
    assert [(e.kind, e.detail.get("sequence")) for e in trace.ordered(events)] == [
        ("outbox", None), ("put", None), ("stream_record", "9"), ("dead_letter", "9"),
        ("stream_record", "10"), ("invocation", "10"), ("row", None),
    ]  # fmt: skip
    assert trace._when("2026-11-30 02:10:00,123+0000") == pytest.approx(1796005800.123)


def test_deployed_the_functions_lines_are_found_by_a_logs_insights_query_in_their_own_format():
    """The query's filter is a substring of the functions' own lines (Powertools' JSON, as the
    handlers write them: an item with a quote and a non-ASCII letter in its key); moto answers
    Logs Insights without applying a filter, so the lines are matched again after it."""
    import io
    import uuid

    import boto3
    from aws_lambda_powertools import Logger
    from moto import mock_aws

    keys = {"PK": {"S": 'CUSTOMER#"Zoë"'}, "SK": {"S": "INFO"}}
    written = io.StringIO()
    logger = Logger(service=f"trail-{uuid.uuid4().hex[:6]}", logger_handler=logging.StreamHandler(written))
    trail.log(logger, "changes written back", changes.read([record(7, **keys)]), applied=1)
    other = changes.read([record(8, PK={"S": "CUSTOMER#someone-else"}, SK={"S": "INFO"})])
    trail.log(logger, "changes written back", other, applied=1)
    line, unrelated = written.getvalue().splitlines()
    item = trail.item(keys)
    needle = json.dumps(item, ensure_ascii=False)[1:-1]
    assert needle in line and needle not in unrelated
    # the query's literal: a part of the needle no escaping can garble, found in the line as written
    literal = trace.searchable(needle)
    assert literal in line and not {'"', "\\"} & set(literal) and len(literal) >= 8
    assert f'like "{literal}"' in trace.QUERY.format(needle=literal, limit=trace.QUERY_LIMIT)
    mocked = mock_aws()
    mocked.start(reset=False)
    try:
        group = f"/aws/lambda/App{uuid.uuid4().hex[:8]}-WriteBack"
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName=group)
        logs.create_log_stream(logGroupName=group, logStreamName="s")
        at = int(trace._when(json.loads(line)["timestamp"]) * 1000)
        events = [{"timestamp": at, "message": text} for text in (line, unrelated)]
        logs.put_log_events(logGroupName=group, logStreamName="s", logEvents=events)
        found = list(trace.insights_lines(logs, [group], wait=lambda _: None)(needle, at / 1000 - 60))
    finally:
        mocked.stop(remove_data=False)
    ((when, function, parsed),) = found
    assert (
        parsed["changes"][0]["item"] == item and parsed["applied"] == 1 and when == pytest.approx(at / 1000)
    )
    assert function == parsed.get("function_name", "")


def test_a_trail_that_cannot_be_logged_never_fails_the_batch_it_tells_of(caplog):
    """The batch was applied before its trail is logged: a record without a sequence number beside
    one with is logged with the numbered one's span; and whatever fails in the trail is a warning,
    never the handler's error."""
    logger = logging.getLogger(f"trail-{id(caplog)}")
    numbered, unnumbered = (changes.read_one(record(n, PK={"S": "a"})) for n in (3, 4))
    unnumbered = dataclasses.replace(unnumbered, sequence=None)
    with caplog.at_level(logging.INFO, logger=logger.name):
        trail.log(logger, "changes folded", [numbered, unnumbered], applied=2)
    (line,) = caplog.records
    assert (line.records, line.first, line.last) == (2, "3", "3")
    caplog.clear()
    broken = dataclasses.replace(numbered, record=None)  # a change the trail cannot read
    with caplog.at_level(logging.INFO, logger=logger.name):
        trail.log(logger, "changes folded", [broken], applied=1)
    (warned,) = caplog.records
    assert warned.levelno == logging.WARNING and "trail could not be logged" in warned.getMessage()
