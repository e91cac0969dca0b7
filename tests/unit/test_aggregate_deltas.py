"""Aggregate deltas of recorded order-line records: what each record adds and takes away."""

from __future__ import annotations

from decimal import Decimal

import pytest

from hybridsync.dynamodb import capacity
from hybridsync.model.errors import Rejected
from hybridsync.sync import aggregate
from hybridsync.sync.aggregate import Aggregation
from shop.model import MODEL, SPEND_BY_CUSTOMER
from tests import events

AGGREGATION = Aggregation(MODEL)

DAY, MONTH = "2026-11-22", "2026-11"


def deltas(name):
    parsed = AGGREGATION.parse(events.record(name))
    assert parsed is not None
    return parsed.deltas


def test_an_inserted_line_adds_to_its_day_month_and_customer():
    assert deltas("order_line_insert") == {
        ("Sales", "p-1", DAY): (2, Decimal("49.98")),
        ("Sales", "p-1", MONTH): (2, Decimal("49.98")),
        ("CustomerSpend", "c-1", MONTH): (49, Decimal("49.98")),  # one point per whole unit spent
    }


def test_an_edit_adds_the_difference_only():
    assert deltas("order_line_modify_quantity")[("Sales", "p-1", DAY)] == (3, Decimal("74.97"))
    assert deltas("order_line_modify_quantity")[("CustomerSpend", "c-1", MONTH)] == (75, Decimal("74.97"))


def test_a_cancellation_and_a_removal_take_the_line_away():
    assert deltas("order_line_modify_cancelled")[("Sales", "p-1", DAY)] == (-5, Decimal("-124.95"))
    # the removed line was already cancelled: it counts for nothing, so removing it changes nothing
    assert deltas("order_line_remove") == {}


def test_deltas_carry_the_stream_sequence_number_for_the_watermark():
    parsed = AGGREGATION.parse(events.record("order_line_insert"))
    assert parsed.sequence == int(events.record("order_line_insert")["dynamodb"]["SequenceNumber"])


@pytest.mark.parametrize("name", ["order_insert", "player_score_insert", "sales_insert", "review_insert"])
def test_other_entities_are_not_the_aggregations(name):
    assert AGGREGATION.parse(events.record(name)) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("poison_order_line_quantity_text", "Quantity must be an integer"),
        ("poison_order_line_no_sequence_number", "SequenceNumber"),
    ],
)
def test_bad_order_lines_are_rejected_with_their_reason(name, reason):
    with pytest.raises(Rejected, match=reason):
        AGGREGATION.parse(events.record(name))


def test_points_are_whole_currency_units_per_line():
    points = SPEND_BY_CUSTOMER.measures[0]  # Sum("Points", of=("Quantity", "UnitPrice"), whole=True)
    assert points.part({"Quantity": 2, "UnitPrice": Decimal("24.99")}) == 49
    assert -points.part({"Quantity": 2, "UnitPrice": Decimal("24.99")}) == -49  # a removal takes it back


def test_write_units_follow_dynamodbs_rules():
    assert capacity.units(200) == 1
    assert capacity.units(1025) == 2
    assert capacity.units(200, transactional=True) == 2
    assert aggregate._units(200, gsi_moves=1) == 4  # a rank entry that moves: a delete and a put
