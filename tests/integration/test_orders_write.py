"""The order write path on the embedded DynamoDB: idempotent placement, line edits, status changes
through the sparse index, deletes, the customer's #static item, and one-Query reads."""

from __future__ import annotations

import threading
import uuid
from decimal import Decimal

import pytest

from hybridsync.dynamodb import capacity, distinct, store
from hybridsync.model.errors import Conflict, Invalid, NotFound
from shop import order_reads, orders
from shop.model import COLLECTION, ORDER, ORDER_REF, STORE

LINES = [
    {"ProductId": "p-1", "Quantity": 2, "UnitPrice": Decimal("24.99")},
    {"ProductId": "p-2", "Quantity": 1, "UnitPrice": Decimal("5.00")},
]


@pytest.fixture
def table(stack):
    return stack.table_names["main"]


@pytest.fixture
def customer():
    return f"c-{uuid.uuid4().hex[:8]}"


def stored_order(dynamodb, table, order):
    return store.get(dynamodb, table, ORDER.key(order))


def test_an_order_is_placed_with_its_lines_and_read_back_in_one_query(dynamodb, table, customer):
    order, created = orders.place_order(dynamodb, table, customer, LINES, idempotency_key="k1")
    assert created and order["Status"] == "OPEN" and order["Total"] == Decimal("54.98")
    assert [line["LineNo"] for line in order["Lines"]] == [1, 2]
    header, lines = orders.order_with_lines(dynamodb, table, customer, order["CreatedAt"], order["OrderId"])
    assert header["Total"] == Decimal("54.98") and len(lines) == 2
    assert orders.get_order(dynamodb, table, order["OrderId"]) == order | {"Lines": order["Lines"]}
    assert {header["Version"]} == {line["Version"] for line in lines}


def test_a_retried_placement_returns_the_first_order_and_places_no_second(dynamodb, table, customer):
    first, created = orders.place_order(dynamodb, table, customer, LINES, idempotency_key="retry-me")
    again, created_again = orders.place_order(dynamodb, table, customer, LINES, idempotency_key="retry-me")
    assert created and not created_again
    assert again == first
    mine = order_reads.customer_orders(dynamodb, table, customer, "0000", "9999")
    assert [o["OrderId"] for o in mine] == [first["OrderId"]]
    assert distinct.members(dynamodb, table, COLLECTION, f"CUSTOMER#{customer}") == 1


def test_concurrent_retries_place_one_order(dynamodb, table, customer):
    results, errors = [], []

    def place():
        try:
            results.append(orders.place_order(dynamodb, table, customer, LINES, idempotency_key="race"))
        except Exception as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=place) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(created for _, created in results) == 1
    assert len({o["OrderId"] for o, _ in results}) == 1
    assert len(order_reads.customer_orders(dynamodb, table, customer, "0000", "9999")) == 1


def test_the_same_key_for_a_different_request_is_a_conflict(dynamodb, table, customer):
    orders.place_order(dynamodb, table, customer, LINES, idempotency_key="k")
    with pytest.raises(Conflict, match="different order"):
        orders.place_order(dynamodb, table, customer, LINES[:1], idempotency_key="k")


def test_bad_orders_are_refused_naming_the_field(dynamodb, table, customer):
    with pytest.raises(Invalid) as error:
        orders.place_order(dynamodb, table, customer, [])
    assert error.value.field == "Lines"
    with pytest.raises(Invalid, match="Status"):
        orders.set_status(dynamodb, table, "whatever", "LOST")


def test_a_total_is_exact_in_38_digits_or_refused_never_rounded(dynamodb, table, customer):
    """Issue 30, row 16: Python's default context summed a total in 28 digits, silently."""
    exact = [{"ProductId": "p-1", "Quantity": 3, "UnitPrice": Decimal("33333333333333333333333333333.33")}]
    order, _ = orders.place_order(dynamodb, table, customer, exact)
    assert order["Total"] == Decimal("99999999999999999999999999999.99")  # 31 digits, kept
    rounding = [{"ProductId": "p-1", "Quantity": 1, "UnitPrice": Decimal("1E+37")},
                {"ProductId": "p-2", "Quantity": 1, "UnitPrice": Decimal("0.01")}]  # fmt: skip
    with pytest.raises(Invalid, match="total needs more than DynamoDB's 38 digits"):
        orders.place_order(dynamodb, table, customer, rounding)


def test_editing_a_line_moves_the_total_and_both_versions(dynamodb, table, customer):
    order, _ = orders.place_order(dynamodb, table, customer, LINES)
    edited = orders.edit_line(dynamodb, table, order["OrderId"], 1, 5)
    assert edited["Lines"][0]["Quantity"] == 5
    assert edited["Total"] == Decimal("5") * Decimal("24.99") + Decimal("5.00")
    assert edited["Version"] > order["Version"] and edited["Lines"][0]["Version"] == edited["Version"]
    with pytest.raises(NotFound):
        orders.edit_line(dynamodb, table, order["OrderId"], 9, 1)


def open_ids(dynamodb, table):
    return {o["OrderId"] for o in order_reads.open_orders(dynamodb, table, 500)}


def test_status_changes_leave_and_reenter_the_sparse_index(dynamodb, table, customer):
    order, _ = orders.place_order(dynamodb, table, customer, LINES)
    order_id = order["OrderId"]
    assert order_id in open_ids(dynamodb, table)
    orders.set_status(dynamodb, table, order_id, "SHIPPED")
    item = stored_order(dynamodb, table, order)
    assert "OpenShard" not in item and "OrderOpenDate" not in item and "TimeShard" in item
    assert order_id not in open_ids(dynamodb, table)
    orders.set_status(dynamodb, table, order_id, "OPEN")  # a failed delivery reopens it
    assert order_id in open_ids(dynamodb, table)
    cancelled = orders.set_status(dynamodb, table, order_id, "CANCELLED")
    assert {line["Status"] for line in cancelled["Lines"]} == {"CANCELLED"}
    assert order_id not in open_ids(dynamodb, table)
    with pytest.raises(Conflict, match="cannot become"):
        orders.set_status(dynamodb, table, order_id, "OPEN")
    with pytest.raises(Conflict, match="only an open order"):
        orders.edit_line(dynamodb, table, order_id, 1, 3)


def test_a_stale_write_loses_to_a_newer_one(dynamodb, table, customer):
    order, _ = orders.place_order(dynamodb, table, customer, LINES)
    header = stored_order(dynamodb, table, order)
    orders.set_status(dynamodb, table, order["OrderId"], "SHIPPED")
    with pytest.raises(Conflict):  # written against the version read before the change
        store.transact(
            dynamodb, [store.update_action(table, ORDER, header, {"Total": 1}, header["Version"] + 5)]
        )


def test_the_static_item_follows_the_customers_orders(dynamodb, table, customer):
    collection = f"CUSTOMER#{customer}"
    assert collection not in distinct.distinct_keys(dynamodb, table, COLLECTION)
    first, _ = orders.place_order(dynamodb, table, customer, LINES)
    second, _ = orders.place_order(dynamodb, table, customer, LINES)
    assert distinct.members(dynamodb, table, COLLECTION, collection) == 2
    assert collection in distinct.distinct_keys(dynamodb, table, COLLECTION)
    orders.delete_order(dynamodb, table, first["OrderId"])
    assert distinct.members(dynamodb, table, COLLECTION, collection) == 1
    orders.delete_order(dynamodb, table, second["OrderId"])
    assert collection not in distinct.distinct_keys(dynamodb, table, COLLECTION)
    header, lines = orders.order_with_lines(dynamodb, table, customer, second["CreatedAt"], second["OrderId"])
    assert header is None and lines == []
    assert store.get(dynamodb, table, ORDER_REF.key(second)) is None
    with pytest.raises(NotFound):
        orders.get_order(dynamodb, table, second["OrderId"])


class ConflictingFirst:
    """A client whose first `times` transactions are cancelled as DynamoDB cancels one whose item
    another transaction is writing (TransactionConflict): nothing of them applied."""

    def __init__(self, client, times):
        self._client, self.left, self.sent = client, times, 0

    def transact_write_items(self, **request):
        self.sent += 1
        if self.left:
            self.left -= 1
            reasons = [{"Code": "TransactionConflict" if n == 0 else "None"}
                       for n in range(len(request["TransactItems"]))]  # fmt: skip
            raise self._client.exceptions.TransactionCanceledException(
                {"Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                 "CancellationReasons": reasons}, "TransactWriteItems")  # fmt: skip
        return self._client.transact_write_items(**request)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_placement_cancelled_by_a_conflict_on_the_static_item_is_retried_in_place(
    dynamodb, table, customer
):
    client = ConflictingFirst(dynamodb, times=3)
    _, created = orders.place_order(client, table, customer, LINES, idempotency_key="race-1")
    assert created and client.sent == 4  # three cancelled, the fourth applied
    assert distinct.members(dynamodb, table, COLLECTION, f"CUSTOMER#{customer}") == 1
    endless = ConflictingFirst(dynamodb, times=store.CONFLICT_RETRIES + 1)
    with pytest.raises(Conflict):  # past the retries: a 409 the client retries with its key
        orders.place_order(endless, table, customer, LINES, idempotency_key="race-2")
    assert endless.sent == store.CONFLICT_RETRIES + 1


def test_a_one_item_write_is_a_conditional_write_not_a_transaction(dynamodb, table):
    meter = capacity.Meter()
    meter.attach(dynamodb)
    try:
        item = STORE.item({"Country": "CH", "Region": "ZH", "City": "Zurich",
                           "StoreId": f"s-{uuid.uuid4().hex[:6]}", "Name": "x", "Version": 1})  # fmt: skip
        store.transact(dynamodb, [store.put_action(table, item, new=True)])
        with pytest.raises(Conflict):  # the same guard: the key is taken
            store.transact(dynamodb, [store.put_action(table, item, new=True)])
    finally:
        meter.detach(dynamodb)
    assert [operation for operation, _ in meter.calls] == [
        "PutItem"
    ]  # the refused one is an error: unmetered


def test_one_orders_time_index_entry_is_one_query_of_its_computed_shard(dynamodb, table, customer):
    order, _ = orders.place_order(dynamodb, table, customer, LINES)
    meter = capacity.Meter()
    meter.attach(dynamodb)
    try:
        entry = order_reads.order_in_time_index(dynamodb, table, order["OrderId"], order["CreatedAt"])
        missing = order_reads.order_in_time_index(dynamodb, table, "no-such-order", order["CreatedAt"])
    finally:
        meter.detach(dynamodb)
    assert entry is not None and entry["OrderId"] == order["OrderId"] and missing is None
    assert entry["TimeShard"] == ORDER.key_value("TimeShard", {"OrderId": order["OrderId"]})
    assert meter.cost.requests == 2  # one Query each, where a random suffix would query all 8 shards


class LeavingHalf:
    """A client whose BatchWriteItem applies only the first half of each request and returns the
    rest as UnprocessedItems, as DynamoDB does under throttling or a partition's limits."""

    def __init__(self, client):
        self._client, self.calls = client, 0

    def batch_write_item(self, RequestItems):  # boto3 names it so
        self.calls += 1
        ((table, requests),) = RequestItems.items()
        done, left = requests[: max(1, len(requests) // 2)], requests[max(1, len(requests) // 2) :]
        self._client.batch_write_item(RequestItems={table: done})
        return {"UnprocessedItems": {table: left} if left else {}}

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_batch_writes_resend_what_dynamodb_left_unprocessed(dynamodb, table):
    prefix = f"batch-{uuid.uuid4().hex[:6]}"
    items = [{"PK": {"S": f"{prefix}#{n}"}, "SK": {"S": "X"}, "N": {"N": str(n)}} for n in range(30)]
    client = LeavingHalf(dynamodb)
    store.batch_write(client, table, [{"PutRequest": {"Item": i}} for i in items])
    assert client.calls > 2  # 25 and 5, each resent until nothing was left
    for item in items:
        assert "Item" in dynamodb.get_item(TableName=table, Key={"PK": item["PK"], "SK": item["SK"]})


def test_a_line_another_writer_put_without_tag_or_version_is_the_orders_too(dynamodb, table, customer):
    """Any writer's items are the order's: a line put by an existing service (no entity tag, no
    version) is read with the order, moved with its status and deleted with it."""
    from hybridsync.dynamodb import store
    from shop.model import ORDER_LINE

    order, _ = orders.place_order(dynamodb, table, customer, LINES, idempotency_key="plain-line")
    values = {"OrderId": order["OrderId"], "CustomerId": customer, "CreatedAt": order["CreatedAt"],
              "LineNo": 9, "ProductId": "p-plain", "Quantity": 1, "UnitPrice": Decimal("1.00"),
              "Status": "OPEN", "Version": 1}  # fmt: skip
    plain = ORDER_LINE.item(values)
    plain.pop("Entity"), plain.pop("Version")
    dynamodb.put_item(TableName=table, Item=store.marshal(plain))
    assert 9 in [line["LineNo"] for line in orders.get_order(dynamodb, table, order["OrderId"])["Lines"]]
    shipped = orders.set_status(dynamodb, table, order["OrderId"], "SHIPPED")
    assert {line["Status"] for line in shipped["Lines"]} == {"SHIPPED"}
    orders.delete_order(dynamodb, table, order["OrderId"])
    assert "Item" not in dynamodb.get_item(TableName=table, Key=store.marshal(ORDER_LINE.key(plain)))
