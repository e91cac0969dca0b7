"""The catalogue of bad input: every kind the app meets from stream records, HTTP requests and
bodies, the command line and its configuration, each with the clear error or dead letter it gets.
The docs' table (docs/bad-input.md) lists the same kinds (a test keeps them together)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hybridsync import cli
from hybridsync.testing.fuzz import nested
from shop_workloads.chaos import BadRequest
from tests.handlers import LambdaContext, http, load
from tests.integration.conftest import use_database_secret

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Kind:
    surface: str  # stream record | HTTP | CLI | configuration
    name: str
    case: Any  # what is fed in (its meaning depends on the surface)
    expected: str  # in the dead letter's reason, the error message, or the exit message
    status: int = 400


def _image(record: dict) -> dict:
    return record["dynamodb"]["NewImage"]


def _set(attribute: str, value: dict) -> Callable[[dict], Any]:
    return lambda r: _image(r).update({attribute: value})


STREAM = [
    Kind("stream record", "unknown eventName", lambda r: r.update(eventName="TRUNCATE"), "unknown eventName"),
    Kind("stream record", "no dynamodb section", lambda r: r.pop("dynamodb"), "no dynamodb section"),
    Kind("stream record", "REMOVE without its old image",
         lambda r: (r.update(eventName="REMOVE"), r["dynamodb"].pop("NewImage")), "without OldImage"),
    Kind("stream record", "a number that is not one", _set("Total", {"N": "twelve"}), "undecodable Total"),
    Kind("stream record", "a string where a number belongs", _set("Total", {"S": "12.00"}), "Total must be a number"),
    Kind("stream record", "an unknown attribute type", _set("Total", {"Q": "1"}), "undecodable Total"),
    Kind("stream record", "a tag its keys contradict", _set("Entity", {"S": "Follow"}),
         "do not fit Follow's key templates"),
    Kind("stream record", "an unknown entity", _set("Entity", {"S": "Invoice"}), "unknown entity 'Invoice'"),
    Kind("stream record", "a key attribute missing", lambda r: _image(r).pop("OrderId"),
         "missing key attribute OrderId"),
    Kind("stream record", "a version that is not an integer", _set("Version", {"N": "1.5"}),
         "Version must be an integer"),
    Kind("stream record", "an id over its length limit", _set("OrderId", {"S": "x" * 200}),
         "over its limit of 128"),
    Kind("stream record", "a version past the 64-bit range", _set("Version", {"N": "1E+30"}), "Version"),
    Kind("stream record", "a NUL character in text", _set("Status", {"S": "OP\x00EN"}), "\\u0000"),
    Kind("stream record", "text that is not valid unicode", _set("Status", {"S": "OP\ud800EN"}), "Status is not valid Unicode"),
]  # fmt: skip


@pytest.mark.parametrize("kind", STREAM, ids=lambda k: k.name)
def test_a_bad_stream_record_becomes_a_dead_letter_with_its_reason(
    kind, handler_env, engine, workload, stream
):
    """Each bad record goes to the dead-letter store with its reason; the good record in the same
    batch lands, and the batch reports no failure (nothing retried for ever)."""
    good_id, bad_id = workload.id("o"), workload.id("o")
    workload.order(good_id)
    workload.order(bad_id)
    good, bad = stream.read()
    kind.case(bad)
    with engine.connect() as conn:
        before = conn.execute(sa.text("SELECT coalesce(max(id), 0) FROM dead_letters")).scalar_one()
    handler = load("write_back")
    assert handler.handler({"Records": [bad, good]}, LambdaContext()) == {"batchItemFailures": []}
    with engine.connect() as conn:
        letters = conn.execute(sa.text("SELECT reason FROM dead_letters WHERE id > :i"), {"i": before}).all()
        landed = conn.execute(sa.text("SELECT count(*) FROM orders WHERE order_id = :o"), {"o": good_id})
        assert landed.scalar_one() == 1
    assert len(letters) == 1 and kind.expected in letters[0].reason, letters


HTTP = [
    Kind("HTTP", "an unknown route", ("GET", "/nowhere", None, {}), "no route '/nowhere'", 404),
    Kind("HTTP", "a method the route does not take", ("DELETE", "/leaderboard", None, {}), "use GET", 405),
    Kind("HTTP", "a count that is not a number", ("GET", "/leaderboard", None, {"n": "ten"}), "n must be", 400),
    Kind("HTTP", "a count out of range", ("GET", "/leaderboard", None, {"n": "1000"}), "n must be", 400),
    Kind("HTTP", "a time that is not ISO-8601", ("GET", "/orders/recent", None, {"since": "yesterday"}),
         "since must be an ISO-8601", 400),
    Kind("HTTP", "a time range backwards", ("GET", "/orders/recent", None,
         {"since": "2026-11-22", "until": "2026-11-01"}), "since must not be after until", 400),
    Kind("HTTP", "a body that is not JSON", ("PUT", "/customers/c-1", "{not json", {}), "body is not valid JSON"),
    Kind("HTTP", "a body that is not an object", ("PUT", "/customers/c-1", [1, 2], {}), "JSON object"),
    Kind("HTTP", "an unknown field", ("PUT", "/customers/c-1", {"Name": "A", "Email": "a@b.c", "Coupon": "X"}, {}),
         "Coupon is not a field"),
    Kind("HTTP", "a required field missing", ("PUT", "/customers/c-1", {"Email": "a@b.c"}, {}), "Name is required"),
    Kind("HTTP", "a field of the wrong type", ("POST", "/orders", {"CustomerId": "c-1", "Lines": [
        {"ProductId": "p-1", "Quantity": 1.5, "UnitPrice": 2}]}, {"Idempotency-Key": "k-type"}),
        "Quantity must be an integer"),
    Kind("HTTP", "a number too large", ("PUT", "/products/p-1/price", {"Price": 1e400}, {}), "Price"),
    Kind("HTTP", "too many items in one request", ("POST", "/orders", {"CustomerId": "c-1", "Lines": [
        {"ProductId": "p-1", "Quantity": 1, "UnitPrice": 2}] * 98}, {"Idempotency-Key": "k-many"}), "Lines"),
    Kind("HTTP", "an id over its length limit", ("GET", "/customers/" + "c" * 200, None, {}),
         "customer id must be 1 to 128 characters"),
    Kind("HTTP", "an injection string as an id", ("GET", "/orders/'%3B DROP TABLE orders--", None, {}),
         "no order", 404),
    Kind("HTTP", "a paging cursor it never gave out", ("GET", "/users/u-1/follows", None, {"cursor": "bm9wZQ"}),
         "cursor is not one this API gave out"),
    Kind("HTTP", "a NUL byte in a path", ("GET", "/products/%00", None, {}),
         "product id must not contain a NUL character"),
    Kind("HTTP", "a NUL byte in a query value", ("GET", "/orders/recent", None, {"since": "2026-11-22\x00"}),
         "since must not contain a NUL character"),
    Kind("HTTP", "a NUL byte in a text field", ("PUT", "/customers/c-1", {"Name": "A\x00", "Email": "a@b.c"}, {}),
         "Name holds a NUL character"),
    Kind("HTTP", "a key separator inside a key level", ("PUT", "/stores/CH/ZH/Z%23rich/s-1",
         {"Name": "A"}, {}), "#"),
    # what a fuzzer found (issue 30): each was a 500, or accepted and then stopped a pipeline
    Kind("HTTP", "a number past 38 digits", ("PUT", "/products/p-1/price", {"Price": Decimal("1" * 40)}, {}),
         "Price has 40 significant digits, over DynamoDB's 38"),
    Kind("HTTP", "a number under DynamoDB's magnitude", ("PUT", "/products/p-1/price", {"Price": Decimal("1e-400")}, {}),
         "Price has a magnitude under DynamoDB's 1E-130"),
    Kind("HTTP", "a number over DynamoDB's magnitude", ("PUT", "/products/p-1/price", {"Price": Decimal("1e126")}, {}),
         "has a magnitude over DynamoDB's"),
    Kind("HTTP", "NaN in a body", ("PUT", "/products/p-1/price", '{"Price": NaN}', {}),
         "Price is not a number DynamoDB can store"),
    Kind("HTTP", "a negative price", ("PUT", "/products/p-1/price", {"Price": -1}, {}), "Price must be at least 0"),
    Kind("HTTP", "a quantity of zero", ("POST", "/orders", {"CustomerId": "c-1", "Lines": [
        {"ProductId": "p-1", "Quantity": 0, "UnitPrice": 2}]}, {}), "Quantity must be at least 1"),
    Kind("HTTP", "an order for a customer that does not exist", ("POST", "/orders", {
        "CustomerId": "nobody-x", "Lines": [{"ProductId": "p-1", "Quantity": 1, "UnitPrice": 2}]}, {}),
         "CustomerId: no Customer 'nobody-x'"),
    Kind("HTTP", "a NUL in an id of a body", ("POST", "/orders", {"CustomerId": "c\x00", "Lines": [
        {"ProductId": "p-1", "Quantity": 1, "UnitPrice": 2}]}, {}), "CustomerId holds a NUL character"),
    Kind("HTTP", "a lone surrogate in a body", ("POST", "/publications/pub-1/titles",
         '{"TitleId": "t-1", "Name": "N", "Tags": ["\\ud800"]}', {}), "Tags[0] is not valid Unicode"),
    Kind("HTTP", "a JSON field nested deeper than 32 levels", ("PUT", "/products/p-1", {
        "Name": "N", "Category": "c", "Price": 1, "Stock": 1, "Attributes": nested(33)}, {}),
         "Attributes is nested deeper than DynamoDB's 32 levels"),
    Kind("HTTP", "an empty name inside a JSON field", ("PUT", "/products/p-1", {
        "Name": "N", "Category": "c", "Price": 1, "Stock": 1, "Attributes": {"": 1}}, {}),
         "Attributes has an attribute name of 0 characters in it"),
    Kind("HTTP", "a body nested 10,000 levels", ("PUT", "/products/p-1/price", "[" * 10_000, {}),
         "body is nested deeper than 32 levels"),
    Kind("HTTP", "a field that makes the item over 400 KB", ("PUT", "/customers/c-1",
         {"Name": "n" * 420_000, "Email": "a@b.c"}, {}), "Name: its item would be over DynamoDB's 409600 bytes"),
    Kind("HTTP", "a key level over its length", ("PUT", "/stores/CH/" + "r" * 1_100 + "/Z/s-1", {"Name": "A"}, {}),
         "Region is 1100 characters long, over its limit of 128"),
    Kind("HTTP", "a tag over its length", ("POST", "/publications/pub-1/titles",
         {"TitleId": "t-1", "Name": "N", "Tags": ["t" * 1_100]}, {}), "Tags[0]: Tag is 1100 characters long"),
    Kind("HTTP", "a body that is not UTF-8", ("PUT", "/customers/c-1", b'{"Name": "\xff", "Email": "a@b.c"}', {}),
         "body is not UTF-8"),
    Kind("HTTP", "a body in UTF-16", ("PUT", "/customers/c-1", '{"Name": "A", "Email": "a@b.c"}'.encode("utf-16"),
         {"Content-Type": "application/json; charset=utf-16"}), "UTF-8", 415),
    Kind("HTTP", "a body of another media type", ("PUT", "/customers/c-1", b"\x89PNG",
         {"Content-Type": "image/png"}), "application/json", 415),
    Kind("HTTP", "invalid percent-encoding in an id", ("GET", "/customers/%FF", None, {}),
         "customer id is not UTF-8 once percent-decoded"),
    Kind("HTTP", "a count in other digits", ("GET", "/leaderboard", None, {"n": "\u00b2"}), "n must be an integer"),
    Kind("HTTP", "a count of 5,000 digits", ("GET", "/leaderboard", None, {"n": "9" * 5_000}), "n must be an integer"),
    Kind("HTTP", "a time past year 9999 in UTC", ("GET", "/orders/recent", None,
         {"until": "9999-12-31T23:59:59-01:00"}), "outside the years 1 to 9999"),
    Kind("HTTP", "a forged cursor", ("GET", "/users/u-1/follows", None, {"cursor": "e30.AAAA"}),
         "cursor is not one this API gave out"),
    Kind("HTTP", "a cursor of {} unsigned", ("GET", "/users/u-1/follows", None, {"cursor": "e30"}),
         "cursor is not one this API gave out"),
    Kind("HTTP", "a quote in a path parameter", ("GET", '/orders/a"b`c', None, {}), "no order", 404),
    Kind("HTTP", "a key level over its length in a read", ("GET", "/stores/CH/" + "r" * 5_000, None, {}),
         "Region is 5000 characters long, over its limit of 128"),
    Kind("HTTP", "a tag over its length in a query", ("GET", "/publications/pub-1/titles", None,
         {"tag": "t" * 10_000}), "tag: Tag is 10000 characters long"),
]  # fmt: skip


def bad_requests() -> tuple[BadRequest, ...]:
    """The HTTP kinds as the chaos run sends them to the running app over a socket."""
    out = []
    for kind in HTTP:
        method, path, body, extra = kind.case
        headers = {k: v for k, v in extra.items() if k[0].isupper()}
        query = {k: v for k, v in extra.items() if not k[0].isupper()}
        out.append(BadRequest(kind.name, method, path, body, headers, query, kind.status, kind.expected))
    return tuple(out)


@pytest.mark.parametrize("kind", HTTP, ids=lambda k: k.name)
def test_a_bad_request_gets_a_4xx_naming_what_is_wrong(kind, handler_env):
    (request,) = (r for r in bad_requests() if r.name == kind.name)
    api = load("api")
    status, answer, _ = http(api, request.method, request.path, body=request.body, headers=request.headers,
                             **request.query)  # fmt: skip
    assert status == kind.status, answer
    assert kind.expected in answer["message"], answer


CLI = [
    Kind("CLI", "no database given", ["reconcile"], "no database: pass --url or set DATABASE_URL"),
    Kind("CLI", "a day that does not exist", ["top", "Sales", "--day", "2026-13-40"], "2026-13-40"),
    Kind("CLI", "a time without a timezone", ["timeseries", "rotate", "--at", "2026-11-22T10:00:00",
                                              "--bucket", "b"], "--at needs a timezone"),
    Kind("CLI", "a flag of the wrong type", ["cost", "--keys", "many"], "invalid int value: 'many'"),
    Kind("CLI", "a query without its range", ["timeseries", "query", "--source", "d"], "query needs --source"),
]  # fmt: skip


@pytest.mark.parametrize("kind", CLI, ids=lambda k: k.name)
def test_a_bad_command_line_exits_with_one_clear_line(kind, monkeypatch, capsys):
    for variable in ("DATABASE_URL", "TABLE_MAIN"):
        monkeypatch.delenv(variable, raising=False)
    if kind.case[0] == "top":
        monkeypatch.setenv("TABLE_MAIN", "t")
    with pytest.raises(SystemExit) as exited:
        cli.main(kind.case)
    message = str(exited.value.code) + capsys.readouterr().err
    assert exited.value.code != 0 and kind.expected in message, message
    assert "Traceback" not in message


CONFIGURATION = [
    Kind("configuration", "a table variable missing", ("env", "TABLE_MAIN"), "TABLE_MAIN is not set", 500),
    Kind("configuration", "a database secret that is not JSON", ("secret", "not json"),
         "does not hold a JSON secret", 500),
    Kind("configuration", "a database secret without a password", ("secret", {"username": "u", "host": "h"}),
         "lacks the field 'password'", 500),
    Kind("configuration", "an unreachable database", ("url", "postgresql+psycopg://u@127.0.0.1:1/x"),
         "database unavailable", 503),
]  # fmt: skip


@pytest.mark.parametrize("kind", CONFIGURATION, ids=lambda k: k.name)
def test_bad_configuration_fails_clearly_and_the_log_says_what_to_fix(kind, handler_env, stack, monkeypatch,
                                                                      caplog):  # fmt: skip
    how, value = kind.case
    if how == "env":
        monkeypatch.delenv(value)
    elif how == "url":
        monkeypatch.setenv("DATABASE_URL", value)
    else:
        use_database_secret(stack, monkeypatch, value if isinstance(value, str) else json.dumps(value))
    caplog.set_level(logging.INFO)
    api = load("api")
    status, answer, _ = http(api, "GET", f"/customers/c-{uuid.uuid4().hex[:6]}")
    assert status == kind.status, answer
    assert kind.expected in "\n".join(r.getMessage() for r in caplog.records)


def test_the_docs_list_every_kind():
    kinds = [*STREAM, *HTTP, *CLI, *CONFIGURATION]
    assert len(kinds) >= 25
    readme = (ROOT / "docs" / "bad-input.md").read_text()
    missing = [k.name for k in kinds if f"| {k.name} |" not in readme]
    assert missing == []
