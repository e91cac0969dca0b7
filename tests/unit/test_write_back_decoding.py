"""Write-back decoding and coalescing on recorded stream records: no services, no network."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridsync.model.errors import Rejected
from hybridsync.sync.writeback import Change, coalesce, decode
from shop.model import MODEL
from tests import events

# fixture -> (entity, key, deleted) of the change it asks for
APPLIED = {
    "order_insert": ("Order", ("o-1",), False),
    "order_modify_shipped": ("Order", ("o-1",), False),
    "order_remove": ("Order", ("o-1",), True),
    "order_line_insert": ("OrderLine", ("o-1", 1), False),
    "order_line_modify_quantity": ("OrderLine", ("o-1", 1), False),
    "order_line_modify_cancelled": ("OrderLine", ("o-1", 1), False),
    "order_line_remove": ("OrderLine", ("o-1", 1), True),
    # poison for the aggregation (which needs sequence numbers), fine for the write-back
    "poison_order_line_no_sequence_number": ("OrderLine", ("o-1", 1), False),
    "player_score_insert": ("PlayerScore", ("c-1",), False),
    "follow_insert": ("Follow", ("c-2", "c-1"), False),
    "follow_remove": ("Follow", ("c-2", "c-1"), True),
    # an existing service's plain writes: placed by their keys, ordered by the stream
    "order_insert_untagged": ("Order", ("o-1",), False),
    "order_insert_without_version": ("Order", ("o-1",), False),
}
# not the write-back's: SQL-origin views, TTL expiries, entities mastered elsewhere or without a table
IGNORED = [
    "customer_insert_sql_origin", "product_availability_insert_sql_origin", "customer_remove_view",
    "customer_remove_ttl_expiry", "order_remove_ttl_expiry", "review_insert", "sales_insert",
]  # fmt: skip
# poison fixture -> the reason its dead letter must give
REJECTED = {
    "poison_order_unknown_event_name": "unknown eventName 'TRUNCATE'",
    "poison_order_no_dynamodb_section": "no dynamodb section",
    "poison_order_remove_without_old_image": "REMOVE record without OldImage",
    "poison_order_malformed_number": 'undecodable Total: {"N": "twelve"} is not a DynamoDB value',
    "poison_order_unknown_attribute_type": "undecodable Total",
    "poison_order_tagged_as_follow": "tagged Follow, but its keys",
    "poison_order_unknown_entity": "unknown entity 'Invoice'",
    "poison_order_missing_key": "Order: missing key attribute OrderId",
    "poison_order_wrong_type": "Total must be a number, got str '12.00'",
    "poison_order_fractional_version": "Version must be an integer",
    "poison_order_oversize_id": "OrderId is 500 characters long, over its limit of 128",
    "poison_order_bad_timestamp": "CreatedAt must be an ISO-8601 timestamp with a timezone",
    "poison_order_integer_past_64_bits": "Version = 18446744073709551616 is outside the 64-bit range",
    "poison_order_line_quantity_text": "Quantity must be an integer, got str 'two'",
}


def test_every_fixture_has_an_expected_outcome():
    assert set(events.names()) == set(APPLIED) | set(IGNORED) | set(REJECTED)


@pytest.mark.parametrize("name", APPLIED)
def test_changes_decode_to_their_row(name):
    change = decode(events.record(name), MODEL)
    assert change is not None
    assert (change.entity.name, change.key, change.deleted) == APPLIED[name]
    assert change.position is not None or name == "poison_order_line_no_sequence_number"


@pytest.mark.parametrize("name", IGNORED)
def test_records_not_for_the_write_back_are_ignored(name):
    assert decode(events.record(name), MODEL) is None


@pytest.mark.parametrize("name", REJECTED)
def test_poison_records_are_rejected_with_their_reason(name):
    with pytest.raises(Rejected) as rejected:
        decode(events.record(name), MODEL)
    assert REJECTED[name] in rejected.value.reason


def test_rows_hold_exact_values_and_json_keeps_numbers_literal():
    order = decode(events.record("order_insert"), MODEL)
    assert order.row["total"] == Decimal("49.98")
    assert order.row["created_at"].isoformat() == "2026-11-22T07:00:00+00:00"
    assert order.row["shipping_address"] == '{"city":"Zürich","lines":["1 Main St"]}'
    line = decode(events.record("order_line_modify_quantity"), MODEL)
    assert (line.row["quantity"], line.row["unit_price"]) == (5, Decimal("24.99"))


def test_a_remove_carries_the_removed_images_version():
    removed = decode(events.record("order_remove"), MODEL)
    shipped = decode(events.record("order_modify_shipped"), MODEL)
    assert removed.version == shipped.version and removed.deleted


# --- coalescing: the newest change per key, whatever the delivery order -----------------------


def _changes() -> list[Change]:
    names = ["order_insert", "order_modify_shipped", "order_remove", "order_line_insert",
             "order_line_modify_quantity", "order_line_modify_cancelled", "follow_insert"]  # fmt: skip
    return [decode(events.record(n), MODEL) for n in names]


def test_coalesce_keeps_the_newest_change_per_key_by_stream_position():
    latest = {(c.entity.name, c.key): c for c in coalesce(_changes())}
    assert set(latest) == {("Order", ("o-1",)), ("OrderLine", ("o-1", 1)), ("Follow", ("c-2", "c-1"))}
    assert latest[("Order", ("o-1",))].deleted  # the REMOVE came last in the stream
    assert latest[("OrderLine", ("o-1", 1))].row["status"] == "CANCELLED"


def test_coalesce_keeps_older_changes_as_the_fallback_chain_newest_first():
    order = next(c for c in coalesce(_changes()) if c.entity.name == "Order")
    chain = []
    while order is not None:
        chain.append(order.position)
        order = order.older
    assert chain == sorted(chain, reverse=True) and len(chain) == 3


@given(st.permutations(range(7)))
def test_coalesce_is_the_same_in_any_delivery_order(order):
    changes = _changes()
    expected = {(c.entity.name, c.key): c.position for c in coalesce(changes)}
    shuffled = coalesce([changes[i] for i in order])
    assert {(c.entity.name, c.key): c.position for c in shuffled} == expected


def test_a_recreate_wins_over_its_tombstone_whatever_its_version():
    removed = decode(events.record("order_remove"), MODEL)
    recreated = decode(events.record("order_insert"), MODEL)
    # a counter that restarts at 1 after a delete (DynamoDBMapper, PynamoDB): later in the stream
    recreated = Change(recreated.entity, recreated.key, 1, False, recreated.row, {}, removed.position + 1)
    for pair in itertools.permutations([removed, recreated]):
        (latest,) = coalesce(pair)
        assert not latest.deleted


def test_a_remove_of_an_expired_item_is_ttls_whatever_identity_it_carries():
    """In a global table TTL deletes in any Region; home's stream gets a replicated delete whose
    identity AWS does not document. Its old image's expiry, past when the record was made, says it
    is TTL's: the row stays. A delete before the expiry is a user's."""
    replicated = events.record("order_remove_ttl_expiry")
    del replicated["userIdentity"]
    data = replicated["dynamodb"]
    data["OldImage"][MODEL.table("main").ttl_attribute] = {"N": "1795440000"}
    data["ApproximateCreationDateTime"] = 1795440005
    assert decode(replicated, MODEL) is None
    data["ApproximateCreationDateTime"] = 1795439995
    assert decode(replicated, MODEL).deleted
