"""Regenerate the stream-event fixtures in this folder from a real stream (AWS's DynamoDB Local).

Each fixture is a Lambda event with one record, as an event source mapping delivers it. Poison
fixtures are made from real records by one edit each; `tests/unit/test_records.py` names the
reason each must be rejected with. Run after a change to the model: `python tests/events/record.py`.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from hybridsync import local  # noqa: E402
from hybridsync.convert import marshal  # noqa: E402
from hybridsync.local.streams import StreamReader  # noqa: E402
from hybridsync.model import MODEL, ORIGIN, ORIGIN_SQL  # noqa: E402

V = 1_795_000_000_000  # versions: fixed, so fixtures are stable
ORDER = {
    "OrderId": "o-1",
    "CustomerId": "c-1",
    "CreatedAt": "2026-11-22T07:00:00.000Z",
    "Status": "OPEN",
    "Total": Decimal("49.98"),
    "ShippingAddress": {"city": "Zürich", "lines": ["1 Main St"]},
}
LINE = {
    "OrderId": "o-1",
    "CustomerId": "c-1",
    "CreatedAt": "2026-11-22T07:00:00.000Z",
    "Status": "OPEN",
    "LineNo": 1,
    "ProductId": "p-1",
    "Quantity": 2,
    "UnitPrice": Decimal("24.99"),
}


def script() -> list[tuple[str, str, dict[str, Any] | None]]:
    """(fixture name, entity, values to put | None to delete the last values): one stream record each."""
    return [
        ("order_insert", "Order", ORDER | {"Version": V}),
        ("order_modify_shipped", "Order", ORDER | {"Status": "SHIPPED", "Version": V + 1}),
        ("order_remove", "Order", None),
        ("order_line_insert", "OrderLine", LINE | {"Version": V}),
        ("order_line_modify_quantity", "OrderLine", LINE | {"Quantity": 5, "Version": V + 1}),
        (
            "order_line_modify_cancelled",
            "OrderLine",
            LINE | {"Quantity": 5, "Status": "CANCELLED", "Version": V + 2},
        ),
        ("order_line_remove", "OrderLine", None),
        ("player_score_insert", "PlayerScore", {"PlayerId": "c-1", "Score": 1200, "Version": V}),
        (
            "follow_insert",
            "Follow",
            {"FollowerId": "c-2", "FolloweeId": "c-1", "CreatedAt": "2026-11-20T10:00:00.000Z", "Version": V},
        ),
        ("follow_remove", "Follow", None),
        (
            "customer_insert_sql_origin",
            "Customer",
            {
                "CustomerId": "c-1",
                "Name": "Zoë O'Brien",
                "Email": "zoe@example.com",
                "Version": V,
                ORIGIN: ORIGIN_SQL,
                "ExpiresAt": 1795086400,
            },
        ),
        (
            "product_availability_insert_sql_origin",
            "ProductAvailability",
            {"ProductId": "p-1", "Price": Decimal("24.99"), "Stock": 12, "Version": V, ORIGIN: ORIGIN_SQL},
        ),
        (
            "review_insert",
            "Review",
            {
                "ReviewId": "r-1",
                "ProductId": "p-1",
                "CustomerId": "c-1",
                "CreatedAt": "2026-11-22T08:00:00.000Z",
                "Rating": 5,
                "Title": "Boils fast",
                "BodyBytes": 10,
                "Body": "Boils fast",
                "Version": V,
            },
        ),
        (
            "sales_insert",
            "Sales",
            {"ProductId": "p-1", "Period": "2026-11-22", "Units": 2, "Revenue": Decimal("49.98")},
        ),
    ]


def derived(fixtures: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Records a client cannot make on demand: TTL expiries (DynamoDB Local deletes expired items
    every ten seconds or so, and none that lacks a key of one of the table's GSIs) and poison."""
    out = {}

    def edit(name: str, source: str, change: Any) -> None:
        record = copy.deepcopy(fixtures[source])
        record["eventID"] = f"{record['eventID']}-{name}"
        change(record)
        out[name] = record

    def new_image(record: dict[str, Any]) -> dict[str, Any]:
        return record["dynamodb"]["NewImage"]

    def ttl(record: dict[str, Any]) -> None:
        record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

    edit("customer_remove_ttl_expiry", "customer_remove_view", ttl)
    edit("order_remove_ttl_expiry", "order_remove", ttl)
    poison = {
        "unknown_event_name": lambda r: r.update(eventName="TRUNCATE"),
        "no_dynamodb_section": lambda r: r.pop("dynamodb"),
        "remove_without_old_image": lambda r: (r.update(eventName="REMOVE"), r["dynamodb"].pop("NewImage")),
        "malformed_number": lambda r: new_image(r).update(Total={"N": "twelve"}),
        "unknown_attribute_type": lambda r: new_image(r).update(Total={"Q": "1"}),
        "no_entity": lambda r: new_image(r).pop("Entity"),
        "unknown_entity": lambda r: new_image(r).update(Entity={"S": "Invoice"}),
        "missing_key": lambda r: new_image(r).pop("OrderId"),
        "missing_version": lambda r: new_image(r).pop("Version"),
        "wrong_type": lambda r: new_image(r).update(Total={"S": "12.00"}),
        "fractional_version": lambda r: new_image(r).update(Version={"N": "1.5"}),
        "oversize_id": lambda r: new_image(r).update(OrderId={"S": "x" * 500}),
        "bad_timestamp": lambda r: new_image(r).update(CreatedAt={"S": "yesterday"}),
        "integer_past_64_bits": lambda r: new_image(r).update(Total={"N": "1"}, Version={"N": str(2**64)}),
    }
    for kind, change in poison.items():
        edit(f"poison_order_{kind}", "order_insert", change)
    edit(
        "poison_order_line_quantity_text",
        "order_line_insert",
        lambda r: new_image(r).update(Quantity={"S": "two"}),
    )
    edit(
        "poison_order_line_no_sequence_number",
        "order_line_insert",
        lambda r: r["dynamodb"].pop("SequenceNumber"),
    )
    return out


def main() -> None:
    with local.start(Path(tempfile.mkdtemp(prefix="fixtures-")), prefix="fixtures") as stack:
        client, table = stack.client(), stack.table_names["main"]
        arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        reader = StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
        reader.read()
        fixtures: dict[str, dict[str, Any]] = {}
        last: dict[str, dict[str, Any]] = {}
        steps = script()
        # the view of a customer expiring: put, then delete as the TTL sweeper would
        steps.append(("customer_remove_view", "Customer", None))
        for name, entity_name, values in steps:
            entity = MODEL.entity(entity_name)
            if values is None:
                client.delete_item(TableName=table, Key=marshal(entity.key(last[entity_name])))
            else:
                client.put_item(TableName=table, Item=marshal(entity.item(values)))
                last[entity_name] = values
            (record,) = reader.read()
            fixtures[name] = record
        fixtures |= derived(fixtures)
        for old in HERE.glob("*.json"):
            old.unlink()
        for name, record in fixtures.items():
            (HERE / f"{name}.json").write_text(
                json.dumps({"Records": [record]}, indent=2, ensure_ascii=False) + "\n"
            )
        print(f"{len(fixtures)} fixtures written to {HERE}")


if __name__ == "__main__":
    main()
