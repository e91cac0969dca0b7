"""Lambda's filter grammar, and the event filters of each consumer against what its code does."""

from __future__ import annotations

import pytest

from hybridsync.model import placing
from hybridsync.model.convert import unmarshal
from hybridsync.model.errors import Rejected
from hybridsync.streams import filters
from hybridsync.sync import writeback
from hybridsync.sync.aggregate import Aggregation
from shop.model import MODEL
from tests import events

AGGREGATION = Aggregation(MODEL)

EVENT = {
    "eventName": "INSERT",
    "dynamodb": {"NewImage": {"Status": {"S": "OPEN"}, "Origin": {"S": "app"}, "Tags": ["a", "b"]}},
    "size": 12,
    "ratio": 0.5,
    "flag": True,
    "nothing": None,
    "empty": "",
}


@pytest.mark.parametrize(
    ("pattern", "admitted"),
    [
        ({"eventName": ["INSERT"]}, True),
        ({"eventName": ["MODIFY", "INSERT"]}, True),  # OR within a field
        ({"eventName": ["MODIFY"]}, False),
        ({"eventName": ["INSERT"], "size": [13]}, False),  # AND across fields
        ({"size": [12]}, True),
        ({"size": [12.0]}, False),  # equality compares numbers as written: 12 is not 12.0 in AWS either
        ({"size": ["12"]}, False),  # ... never as text
        ({"flag": [True]}, True),
        ({"flag": [1]}, False),
        ({"nothing": [None]}, True),
        ({"missing": [None]}, False),  # null: present and null
        ({"empty": [""]}, True),
        ({"dynamodb": {"NewImage": {"Status": {"S": [{"prefix": "OP"}]}}}}, True),
        ({"dynamodb": {"NewImage": {"Status": {"S": [{"prefix": "op"}]}}}}, False),
        ({"dynamodb": {"NewImage": {"Status": {"S": [{"prefix": {"equals-ignore-case": "op"}}]}}}}, True),
        ({"dynamodb": {"NewImage": {"Status": {"S": [{"suffix": "EN"}]}}}}, True),
        ({"dynamodb": {"NewImage": {"Status": {"S": [{"equals-ignore-case": "open"}]}}}}, True),
        ({"dynamodb": {"NewImage": {"Origin": {"S": [{"anything-but": ["sql"]}]}}}}, True),
        ({"dynamodb": {"NewImage": {"Origin": {"S": [{"anything-but": "app"}]}}}}, False),
        ({"dynamodb": {"NewImage": {"Origin": {"S": [{"anything-but": {"prefix": "ap"}}]}}}}, False),
        ({"dynamodb": {"NewImage": {"Gone": {"S": [{"anything-but": ["sql"]}]}}}}, False),  # needs a value
        ({"dynamodb": {"NewImage": {"Tags": ["b"]}}}, True),  # any element of an array
        ({"size": [{"numeric": [">", 10, "<=", 12]}]}, True),
        ({"size": [{"numeric": ["<", 12]}]}, False),
        ({"ratio": [{"numeric": ["=", 0.5]}]}, True),
        ({"eventName": [{"numeric": [">", 0]}]}, False),  # text is not a number
        ({"dynamodb": {"NewImage": {"Origin": {"S": [{"exists": True}]}}}}, True),
        ({"dynamodb": {"NewImage": {"Origin": {"S": [{"exists": False}]}}}}, False),
        ({"dynamodb": {"OldImage": {"Origin": {"S": [{"exists": False}]}}}}, True),  # parent missing
        ({"dynamodb": {"NewImage": [{"exists": True}]}}, False),  # exists is for leaves, not objects
        ({"$or": [{"eventName": ["REMOVE"]}, {"size": [12]}]}, True),
        ({"$or": [{"eventName": ["REMOVE"]}, {"size": [13]}]}, False),
    ],
)
def test_grammar(pattern, admitted):
    assert filters.matches(pattern, EVENT) is admitted


def test_a_record_passes_when_any_pattern_matches_and_no_patterns_pass_all():
    assert filters.admits([{"eventName": ["REMOVE"]}, {"eventName": ["INSERT"]}], EVENT)
    assert not filters.admits([{"eventName": ["REMOVE"]}], EVENT)
    assert filters.admits([], EVENT)


@pytest.mark.parametrize(
    "pattern",
    [
        {"size": [{"wildcard": "1*"}]},
        {"size": [{"numeric": [">>", 1]}]},
        {"size": [{"numeric": [">", "1"]}]},
        {"size": [{"exists": "yes"}]},
        {"size": [{"prefix": 1}]},
        {"size": "12"},
        {"size": [{"prefix": "1", "suffix": "2"}]},
    ],
)
def test_unknown_or_malformed_rules_are_errors_not_silent_passes(pattern):
    with pytest.raises(ValueError):
        filters.matches(pattern, EVENT)


# --- each consumer's filters say what its code does ------------------------------------------


def write_back_acts(record: dict) -> bool:
    """Whether the write-back would apply the record or dead-letter it (not just ignore it)."""
    try:
        return writeback.decode(record, MODEL) is not None
    except Rejected:
        return True


def aggregate_acts(record: dict) -> bool:
    try:
        return AGGREGATION.parse(record) is not None
    except Rejected:
        return True


CONSUMERS = {"write_back": (writeback.event_filters(MODEL), write_back_acts),
             "aggregate": (AGGREGATION.event_filters(), aggregate_acts)}  # fmt: skip


def shares_a_prefix(record: dict) -> bool:
    """A record of an entity whose keys begin as an aggregate source's do (an order beside its
    lines): a prefix cannot tell them apart, so the code tells."""
    keys = unmarshal(record["dynamodb"]["Keys"])
    entity = placing.place(MODEL, keys, None)
    sources = placing.key_prefixes([e for e, _ in AGGREGATION.sources.values()])
    return entity is not None and all(
        any(str(keys[a]).startswith(p) for p in heads) for a, heads in sources.items()
    )


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_what_the_code_ignores_the_filters_drop(consumer):
    patterns, acts = CONSUMERS[consumer]
    for name in events.names():
        record = events.record(name)
        if not acts(record) and not (consumer == "aggregate" and shares_a_prefix(record)):
            assert not filters.admits(patterns, record), name


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_what_the_filters_drop_the_code_never_applies(consumer):
    """A dropped record is ignored by the code or, if malformed, rejected: never applied. (Poison of
    a foreign shape, an unknown entity or event name, is dropped before it costs an invocation.)"""
    patterns, acts = CONSUMERS[consumer]
    for name in events.names():
        record = events.record(name)
        if not filters.admits(patterns, record) and acts(record):
            assert name.startswith("poison_"), name


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_well_formed_records_are_delivered_exactly_when_the_code_acts_on_them(consumer):
    patterns, acts = CONSUMERS[consumer]
    decisions = {name: filters.admits(patterns, events.record(name)) for name in events.names()}
    for name, admitted in decisions.items():
        record = events.record(name)
        if not name.startswith("poison_") and not (consumer == "aggregate" and shares_a_prefix(record)):
            assert admitted == acts(record), name
    assert any(decisions.values()) and not all(decisions.values())


def test_the_write_back_filters_drop_sql_origin_and_ttl_expiries():
    for name in ("customer_insert_sql_origin", "order_remove_ttl_expiry", "sales_insert"):
        assert not filters.admits(writeback.event_filters(MODEL), events.record(name)), name
    marked = events.record("order_insert")
    marked["dynamodb"]["NewImage"]["Origin"] = {"S": "sql"}
    assert not filters.admits(writeback.event_filters(MODEL), marked)
    assert filters.admits(writeback.event_filters(MODEL), events.record("order_insert"))
