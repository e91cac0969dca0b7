"""What `reindex` derives for one item, and the update it sends (no network)."""

from __future__ import annotations

from decimal import Decimal

from hybridsync.dynamodb.reindex import changes, reindex, update_request
from shop.model import MAIN, MODEL, ORDER

VALUES = {"OrderId": "o-1", "CustomerId": "c-1", "CreatedAt": "2026-01-02T03:04:05.000Z",
          "Total": Decimal("7"), "Version": 3}  # fmt: skip


def test_an_item_as_its_writers_write_it_is_current():
    assert changes(ORDER, ORDER.item(VALUES | {"Status": "OPEN"})) == ({}, [])


def test_missing_keys_are_set_and_keys_that_no_longer_apply_are_removed():
    shipped = ORDER.item(VALUES | {"Status": "SHIPPED"})
    stored = {k: v for k, v in shipped.items() if k not in ("GSI1PK", "GSI1SK", "StatusShard")}
    stored |= {"OpenShard": "OPEN#1", "OrderOpenDate": VALUES["CreatedAt"]}  # written while it was open
    sets, removes = changes(ORDER, stored)
    assert sets == {k: shipped[k] for k in ("StatusShard", "GSI1PK", "GSI1SK")}
    assert sorted(removes) == ["OpenShard", "OrderOpenDate"]


def test_the_update_is_conditioned_on_every_attribute_read_and_the_keys_it_changes():
    """Never on the version alone: a writer outside the model may change Status without bumping
    it (the console, the CLI), or restart its counter after a delete."""
    stored = {k: v for k, v in ORDER.item(VALUES | {"Status": "OPEN"}).items() if k != "GSI1SK"}
    stored["GSI1PK"] = "stale"
    sets, removes = changes(ORDER, stored)
    request = update_request(ORDER, stored, sets, removes)
    names = request["ExpressionAttributeNames"]
    assert set(names.values()) == set(stored) - {"PK", "SK"} | {"GSI1SK"}  # never the primary key
    condition = request["ConditionExpression"]
    at = {name: placeholder for placeholder, name in names.items()}
    assert f"{at['Status']} = :" in condition and f"{at['Version']} = :" in condition
    assert f"{at['GSI1PK']} = :" in condition and f"attribute_not_exists({at['GSI1SK']})" in condition
    assert request["UpdateExpression"].startswith("SET ") and "REMOVE" not in request["UpdateExpression"]
    assert request["Key"] == {"PK": {"S": "CUSTOMER#c-1"}, "SK": {"S": stored["SK"]}}


def test_an_item_without_a_version_is_conditioned_on_every_attribute_read():
    stored = {
        k: v for k, v in ORDER.item(VALUES | {"Status": "OPEN"}).items() if k not in ("Version", "GSI1PK")
    }
    request = update_request(ORDER, stored, *changes(ORDER, stored))
    watched = set(request["ExpressionAttributeNames"].values())
    assert watched == set(stored) - {"PK", "SK"} | {"GSI1PK"}


def test_an_item_whose_values_the_model_refuses_is_left_alone():
    valid = ORDER.item(VALUES | {"Status": "OPEN"})
    poison = valid | {"OrderId": "x" * 200}  # another writer's bad input: the consumers dead-letter it
    stale = {k: v for k, v in valid.items() if k != "GSI1SK"}
    report = reindex(None, "main", MAIN, MODEL, [poison, stale, {"PK": "x", "SK": "y"}], dry_run=True)
    counts = report.entities["Order"]
    assert (counts.checked, counts.invalid, counts.updated, report.not_declared) == (2, 1, 1, 1)
    assert "over its limit of 128" in report.invalid[0] and "GSI1SK" in report.examples[0]


def test_items_of_any_writer_are_placed_by_their_keys():
    """Untagged and without a version (a plain PutItem of another service): an Order by its keys.
    An item no entity can be decided for is left alone and named, whatever its tag holds."""
    plain = {k: v for k, v in ORDER.item(VALUES | {"Status": "OPEN"}).items()
             if k not in ("Entity", "Version", "GSI1SK")}  # fmt: skip
    contradicted = ORDER.item(VALUES | {"Status": "OPEN"}) | {"SK": "REVIEW#r-1"}
    listed = plain | {"Entity": ["not", "a", "name"]}  # unhashable: it stopped reindex (TypeError)
    report = reindex(None, "main", MAIN, MODEL, [plain, contradicted, listed], dry_run=True)
    assert (report.entities["Order"].checked, report.entities["Order"].updated) == (1, 1)
    assert report.not_declared == 2
    assert any("do not fit" in problem for problem in report.invalid), report.invalid
    assert any("unknown entity" in problem for problem in report.invalid), report.invalid
