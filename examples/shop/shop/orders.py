"""Orders, written where they are mastered (DynamoDB): place with lines in one transaction,
idempotent under client retries; edit a line; change status; delete with the lines; read one order
with its lines in one Query (pattern 17).

Every write recomputes the keys the model derives, so a status change moves the order in or out of
the sparse `OpenOrders` index whichever way it is written (patterns 8, 9). The customer's
collection keeps its `#static` item (pattern 20). The write-back carries it all to PostgreSQL.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hybridsync.dynamodb import distinct, store
from hybridsync.model import keys, placing, versions
from hybridsync.model.convert import json_text, marshal, unmarshal
from hybridsync.model.errors import Conflict, Invalid, NotFound, Rejected
from hybridsync.model.limits import ARITHMETIC, DIGITS
from shop.model import (
    CANCELLED,
    COLLECTION,
    ENTITY,
    MODEL,
    OPEN,
    ORDER,
    ORDER_LINE,
    ORDER_REF,
    ORDER_STATUSES,
    SHIPPED,
    VERSION,
)

# ref + order + the collection's #static item + the lines fit one TransactWriteItems
MAX_LINES = store.TRANSACTION_LIMIT - 3
# which status an order may move to from which: a cancelled order stays cancelled
TRANSITIONS = {OPEN: {SHIPPED, CANCELLED}, SHIPPED: {OPEN}, CANCELLED: set()}
_IDS = uuid.UUID("6d1d8f0e-8c57-4c55-9a53-2f7b1c1f0a11")  # namespace of order ids from request keys


def _collection(customer_id: str) -> str:
    return ORDER.key_value("PK", {"CustomerId": customer_id})


def order_id_for(customer_id: str, idempotency_key: str) -> str:
    """The order id a request key stands for: a retry of the request names the same order."""
    return str(uuid.uuid5(_IDS, f"{customer_id}\n{idempotency_key}"))


def place_order(
    client: Any,
    table: str,
    customer_id: str,
    lines: list[dict[str, Any]],
    *,
    idempotency_key: str | None = None,
    shipping_address: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> tuple[dict[str, Any], bool]:
    """Place an order with its lines (`ProductId`, `Quantity`, `UnitPrice` each) in one
    transaction. Returns (order with its lines, created): a retry with the same idempotency key
    returns the order the first attempt placed (created False); the same key with a different
    request raises Conflict. Without a key every call places a new order."""
    check_line_count(lines)
    request = json_text({"CustomerId": customer_id, "Lines": lines, "ShippingAddress": shipping_address})
    fingerprint = hashlib.sha256(request.encode()).hexdigest()
    order_id = order_id_for(customer_id, idempotency_key) if idempotency_key else str(uuid.uuid4())
    placed = _placed(client, table, order_id, fingerprint)
    if placed is not None:
        return placed, False

    version = versions.next_version()
    created = keys.iso_ms(now or datetime.now(UTC))
    common = {"OrderId": order_id, "CustomerId": customer_id, "CreatedAt": created, "Status": OPEN,
              VERSION: version}  # fmt: skip
    line_items = [ORDER_LINE.item(common | line | {"LineNo": n}) for n, line in enumerate(lines, start=1)]
    total = _total(lines)
    header = ORDER.item(common | {"Total": total, "ShippingAddress": shipping_address})
    ref = ORDER_REF.item({"OrderId": order_id, "CustomerId": customer_id, "CreatedAt": created,
                          "Request": fingerprint, VERSION: version})  # fmt: skip
    actions = [
        store.put_action(table, ref, new=True),
        store.put_action(table, header, new=True),
        *(store.put_action(table, line, new=True) for line in line_items),
        distinct.joined(table, COLLECTION, _collection(customer_id), version),
    ]
    try:
        # the token makes DynamoDB itself answer a retry of this very call (within 10 minutes)
        store.transact(client, actions, token=order_id if idempotency_key else None)
    except Conflict:
        placed = _placed(client, table, order_id, fingerprint)  # a concurrent retry won the race
        if placed is None:
            raise
        return placed, False
    return _shape(header, line_items), True


def check_line_count(lines: list[Any]) -> None:
    if not 1 <= len(lines) <= MAX_LINES:
        raise Invalid("Lines", f"Lines must hold 1 to {MAX_LINES} lines, got {len(lines)}")


def _total(lines: list[dict[str, Any]], start: Decimal = Decimal(0)) -> Decimal:
    """The lines' quantity x unit price, summed in DynamoDB's 38 digits (never rounded silently)."""
    try:
        for line in lines:
            start = ARITHMETIC.add(
                start, ARITHMETIC.multiply(Decimal(line["Quantity"]), Decimal(line["UnitPrice"]))
            )
    except ArithmeticError:
        raise Invalid("Lines", f"the order's total needs more than DynamoDB's {DIGITS} digits") from None
    return start


def _placed(client: Any, table: str, order_id: str, fingerprint: str) -> dict[str, Any] | None:
    ref = store.get(client, table, ORDER_REF.key({"OrderId": order_id}))
    if ref is None:
        return None
    if ref["Request"] != fingerprint:
        raise Conflict(f"idempotency key already used for a different order ({order_id})")
    return get_order(client, table, order_id)


def _shape(header: dict[str, Any], lines: list[dict[str, Any]]) -> dict[str, Any]:
    return ORDER.values(header) | {"Lines": [ORDER_LINE.values(line) for line in lines]}


# --- reads -----------------------------------------------------------------------------------


def order_with_lines(client: Any, table: str, customer_id: str, created_at: str,
                     order_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:  # fmt: skip
    """The order header and its lines, from one Query: the lines sort right after their order
    in the customer's collection (`ORDER#<time>#<id>` then `...#LINE#0001`)."""
    values = {"CustomerId": customer_id, "CreatedAt": created_at, "OrderId": order_id}
    pages = store.pages(
        client, "query", TableName=table, ConsistentRead=True,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :sk)",
        ExpressionAttributeValues=marshal({":pk": ORDER.key_value("PK", values),
                                           ":sk": ORDER.key_value("SK", values)}),
    )  # fmt: skip
    header, lines = None, []
    for item in (unmarshal(i) for page in pages for i in page["Items"]):
        if item.get("OrderId") != order_id:
            continue  # another order whose id merely starts like this one
        entity = _entity_of(item)  # by its keys: any writer's items, tagged or not
        if entity is ORDER:
            header = item
        elif entity is ORDER_LINE:
            lines.append(item)
    return header, lines


def _entity_of(item: dict[str, Any]) -> Any:
    try:
        return placing.place(MODEL, {"PK": item["PK"], "SK": item["SK"]}, item.get(ENTITY))
    except Rejected:
        return None  # neither an order nor its line: not this order's


def _held(item: dict[str, Any]) -> int | None:
    """An item's version; None for one a writer stored without (guards then ask it still has none)."""
    return None if item.get(VERSION) is None else int(item[VERSION])


def _next(*items: dict[str, Any]) -> int:
    return versions.next_version(max((_held(i) or 0) for i in items))


def _stored(client: Any, table: str, order_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict]:
    ref = store.get(client, table, ORDER_REF.key({"OrderId": order_id}))
    if ref is None:
        raise NotFound(f"no order {order_id!r}")
    header, lines = order_with_lines(client, table, ref["CustomerId"], ref["CreatedAt"], order_id)
    if header is None:
        raise NotFound(f"no order {order_id!r}")
    return header, lines, ref


def get_order(client: Any, table: str, order_id: str) -> dict[str, Any]:
    """One order with its lines by id: its reference item, then one Query."""
    header, lines, _ = _stored(client, table, order_id)
    return _shape(header, lines)


# --- changes ---------------------------------------------------------------------------------


def edit_line(client: Any, table: str, order_id: str, line_no: int, quantity: int) -> dict[str, Any]:
    """Set a line's quantity; the order's total follows in the same transaction. Open orders only."""
    if quantity < 1:
        raise Invalid("Quantity", f"Quantity must be at least 1, got {quantity}")
    header, lines, _ = _stored(client, table, order_id)
    if header["Status"] != OPEN:
        raise Conflict(f"order {order_id!r} is {header['Status']}; only an open order's lines change")
    line = next((li for li in lines if int(li["LineNo"]) == line_no), None)
    if line is None:
        raise NotFound(f"order {order_id!r} has no line {line_no}")
    version = _next(header, *lines)
    total = _total(
        [{"Quantity": quantity - line["Quantity"], "UnitPrice": line["UnitPrice"]}], header["Total"]
    )
    store.transact(client, [
        store.update_action(table, ORDER_LINE, line, {"Quantity": quantity}, version),
        store.update_action(table, ORDER, header, {"Total": total}, version),
    ])  # fmt: skip
    return get_order(client, table, order_id)


def set_status(client: Any, table: str, order_id: str, status: str) -> dict[str, Any]:
    """Move an order and its lines to `status` in one transaction (UpdateItem, keys recomputed:
    shipping or cancelling takes the order out of OpenOrders, reopening puts it back)."""
    if status not in ORDER_STATUSES:
        raise Invalid("Status", f"Status must be one of {', '.join(ORDER_STATUSES)}, got {status!r}")
    header, lines, _ = _stored(client, table, order_id)
    if status == header["Status"]:
        return _shape(header, lines)  # already there: a retried request changes nothing
    if status not in TRANSITIONS[header["Status"]]:
        raise Conflict(f"order {order_id!r} is {header['Status']} and cannot become {status}")
    version = _next(header, *lines)
    store.transact(client, [
        store.update_action(table, ORDER, header, {"Status": status}, version),
        *(store.update_action(table, ORDER_LINE, line, {"Status": status}, version) for line in lines),
    ])  # fmt: skip
    return get_order(client, table, order_id)


def delete_order(client: Any, table: str, order_id: str) -> None:
    """Delete an order, its lines and its reference in one transaction (the customer's #static
    item goes with their last order)."""
    header, lines, ref = _stored(client, table, order_id)
    version = _next(header)
    store.transact(client, [
        store.delete_action(table, ORDER.key(header), _held(header)),
        *(store.delete_action(table, ORDER_LINE.key(line), _held(line)) for line in lines),
        store.delete_action(table, ORDER_REF.key(ref), _held(ref)),
        distinct.left(client, table, COLLECTION, _collection(header["CustomerId"]), version),
    ])  # fmt: skip
