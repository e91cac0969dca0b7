"""The write routes of the HTTP API, with API Gateway v2 events: status codes, the error envelope
(400 naming the field, 404, 409), idempotent retries, and every capability reachable over HTTP."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa

from tests.handlers import http, load


@pytest.fixture
def api(handler_env):
    return load("api")


@pytest.fixture
def tag():
    return uuid.uuid4().hex[:8]


ORDER = {"CustomerId": "c-http", "Lines": [{"ProductId": "p-1", "Quantity": 2, "UnitPrice": 24.99}]}


@pytest.fixture(autouse=True)
def catalogue(api):
    """What ORDER references exists: an order for an unknown customer or product is a 400."""
    assert http(api, "PUT", "/customers/c-http", {"Name": "C", "Email": "c@example.com"})[0] == 200
    product = {"Name": "P", "Category": "tools", "Price": 24.99, "Stock": 5}
    assert http(api, "PUT", "/products/p-1", product)[0] == 200


def test_an_order_is_placed_once_however_often_the_client_retries(api, tag):
    headers = {"idempotency-key": f"key-{tag}"}
    code, first, _ = http(api, "POST", "/orders", ORDER, headers)
    assert code == 201 and first["Total"] == "49.98" and first["Lines"][0]["LineNo"] == 1
    code, again, _ = http(api, "POST", "/orders", ORDER, headers)
    assert (code, again) == (200, first)
    code, body, _ = http(api, "POST", "/orders", ORDER | {"Lines": ORDER["Lines"] * 2}, headers)
    assert code == 409 and body["statusCode"] == 409 and "different order" in body["message"]
    assert http(api, "GET", f"/orders/{first['OrderId']}")[1] == first


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"Lines": ORDER["Lines"]}, "CustomerId"),
        ({"CustomerId": "c", "Lines": []}, "Lines"),
        (
            {"CustomerId": "c", "Lines": [{"ProductId": "p", "Quantity": 1.5, "UnitPrice": 1}]},
            "Lines[0].Quantity",
        ),
        ({"CustomerId": "c", "Lines": [{"ProductId": "p", "Quantity": 1}]}, "Lines[0].UnitPrice"),
        (ORDER | {"Coupon": "FREE"}, "Coupon"),
        ([1, 2], "body"),
        ("{not json", "body"),
    ],
)
def test_a_bad_order_is_a_400_naming_the_field(api, body, field):
    code, answer, _ = http(api, "POST", "/orders", body)
    assert code == 400 and field in answer["message"], answer


def test_an_order_is_edited_shipped_and_deleted(api):
    _, order, _ = http(api, "POST", "/orders", ORDER)
    path = f"/orders/{order['OrderId']}"
    code, edited, _ = http(api, "PATCH", f"{path}/lines/1", {"Quantity": 3})
    assert code == 200 and edited["Total"] == "74.97"
    assert http(api, "PATCH", f"{path}/lines/7", {"Quantity": 3})[0] == 404
    assert http(api, "PATCH", f"{path}/lines/x", {"Quantity": 3})[0] == 400
    code, shipped, _ = http(api, "PUT", f"{path}/status", {"Status": "SHIPPED"})
    assert code == 200 and shipped["Status"] == "SHIPPED"
    code, body, _ = http(api, "PATCH", f"{path}/lines/1", {"Quantity": 1})
    assert code == 409 and "SHIPPED" in body["message"]
    assert http(api, "PUT", f"{path}/status", {"Status": "LOST"})[0] == 400
    assert http(api, "DELETE", path)[0] == 204
    assert http(api, "GET", path)[0] == 404
    assert http(api, "DELETE", path)[0] == 404


def test_follows_are_paged_both_ways(api, tag):
    for other in ("b", "c", "d"):
        assert http(api, "PUT", f"/users/{tag}-a/follows/{tag}-{other}")[0] == 201
    assert http(api, "PUT", f"/users/{tag}-a/follows/{tag}-b")[0] == 200
    code, page, _ = http(api, "GET", f"/users/{tag}-a/follows", limit="2")
    assert code == 200 and page["follows"] == [f"{tag}-b", f"{tag}-c"] and page["cursor"]
    _, rest, _ = http(api, "GET", f"/users/{tag}-a/follows", limit="2", cursor=page["cursor"])
    assert rest == {"follows": [f"{tag}-d"], "cursor": None}
    assert http(api, "GET", f"/users/{tag}-b/followers")[1]["followers"] == [f"{tag}-a"]
    assert http(api, "GET", f"/users/{tag}-a/follows", limit="0")[1]["message"].startswith("limit")
    assert "cursor" in http(api, "GET", f"/users/{tag}-a/follows", cursor="bogus")[1]["message"]
    assert http(api, "DELETE", f"/users/{tag}-a/follows/{tag}-b")[0] == 204
    assert http(api, "DELETE", f"/users/{tag}-a/follows/{tag}-b")[0] == 404


def test_stores_by_level(api, tag):
    country = f"C{tag}"
    assert http(api, "PUT", f"/stores/{country}/ZH/Zürich/s1", {"Name": "Bahnhof"})[0] == 200
    assert http(api, "PUT", f"/stores/{country}/ZH/Winterthur/s2", {"Name": "Altstadt"})[0] == 200
    assert len(http(api, "GET", f"/stores/{country}")[1]["stores"]) == 2
    assert [s["StoreId"] for s in http(api, "GET", f"/stores/{country}/ZH/Zürich")[1]["stores"]] == ["s1"]
    assert http(api, "PUT", f"/stores/{country}/ZH/Zürich/s3", {})[1]["message"] == "Name is required"


def test_a_store_whose_levels_build_a_key_over_dynamodbs_limit_is_a_400_naming_them(api, tag):
    """Each level within its field's limit, four of them a sort key DynamoDB refuses (it answered
    500: GetItem's ValidationException)."""
    level = "😀" * 128
    status, body, *_ = http(api, "PUT", f"/stores/{tag}/{level}/{level}/{level}", {"Name": "Far"})
    assert status == 400 and "City, Region, StoreId" in json.dumps(body) and "1024" in json.dumps(body)


def test_publication_history_over_http(api, tag):
    path = f"/publications/pub-{tag}"
    assert http(api, "PUT", path, {"Name": "One", "Editor": "e"})[0] == 200
    assert http(api, "PUT", path, {"Description": "more", "Editor": "e", "ExpectedRevision": 1})[0] == 200
    code, body, _ = http(api, "PUT", path, {"Name": "Stale", "Editor": "e", "ExpectedRevision": 1})
    assert code == 409 and "revision 2" in body["message"]
    assert http(api, "PUT", path, {"Name": "No editor"})[1]["message"] == "Editor is required"
    latest = http(api, "GET", path)[1]
    assert (latest["Revision"], latest["Name"], latest["Description"]) == (2, "One", "more")
    assert [r["Revision"] for r in http(api, "GET", f"{path}/history")[1]["revisions"]] == [2, 1]
    assert http(api, "GET", f"{path}/revisions/1")[1].get("Description") is None
    assert http(api, "POST", f"{path}/titles", {"TitleId": "t1", "Name": "Keys", "Tags": ["db"]})[0] == 201
    assert http(api, "GET", f"{path}/titles", tag="db")[1]["titles"] == [{"TitleId": "t1"}]
    assert http(api, "GET", f"{path}/titles/t1/tags")[1]["tags"] == ["db"]


def test_an_expected_revision_is_0_for_a_new_publication_and_never_negative(api, tag):
    """Issue 51: the document's minimum is what the route takes; 0 creates only."""
    path = f"/publications/new-{tag}"
    code, body, _ = http(api, "PUT", path, {"Name": "N", "Editor": "e", "ExpectedRevision": -1})
    assert code == 400 and "ExpectedRevision must be an integer of at least 0" in body["message"]
    assert http(api, "GET", path)[0] == 404
    assert http(api, "PUT", path, {"Name": "N", "Editor": "e", "ExpectedRevision": 0})[0] == 200
    code, body, _ = http(api, "PUT", path, {"Name": "Again", "Editor": "e", "ExpectedRevision": 0})
    assert code == 409 and "revision 1" in body["message"]


def test_a_large_review_round_trips_over_http(api, tag):
    body = "Boils fast and quietly. " * 20_000  # 480 KB: gzip in the item
    path = f"/products/p-1/reviews/r-{tag}"
    review = {"CustomerId": "c-http", "Rating": 5, "Title": "Good", "Body": body}
    code, stored, _ = http(api, "PUT", path, review)
    assert code == 200 and stored["BodyBytes"] == len(body) and stored["Storage"] == "gzip"
    assert "Body" not in stored and "BodyGz" not in stored
    assert http(api, "GET", path)[1]["Body"] == body
    assert "Rating" in http(api, "PUT", path, review | {"Rating": 9})[1]["message"]
    assert http(api, "DELETE", path)[0] == 204
    assert http(api, "GET", path)[0] == 404


@pytest.mark.parametrize("customer", ["   ", " ", "nobody-x", "0", "null"])
def test_a_review_by_a_customer_that_does_not_exist_is_a_400(api, tag, customer):
    """Issue 51: the route checks the review's references as an order's are, for every value."""
    path = f"/products/p-1/reviews/r-{tag}"
    review = {"CustomerId": customer, "Rating": 5, "Title": "Good", "Body": "b"}
    code, answer, _ = http(api, "PUT", path, review)
    assert (code, answer["message"]) == (400, f"CustomerId: no Customer {customer!r}")
    assert http(api, "GET", path)[0] == 404


def test_a_review_of_a_product_that_does_not_exist_is_a_404(api, tag):
    path = f"/products/none-{tag}/reviews/r-{tag}"
    review = {"CustomerId": "c-http", "Rating": 5, "Title": "Good", "Body": "b"}
    code, answer, _ = http(api, "PUT", path, review)
    assert (code, answer["message"]) == (404, f"no product 'none-{tag}'")
    assert http(api, "GET", path)[0] == 404


def test_the_catalogue_is_written_in_postgresql(api, engine, tag):
    customer = f"c-{tag}"
    code, body, _ = http(api, "PUT", f"/customers/{customer}", {"Name": "Zoë", "Email": "z@example.com"})
    assert code == 200 and body["Version"] > 0
    product = {"Name": "Kettle", "Category": "kitchen", "Price": 24.99, "Stock": 3}
    assert http(api, "PUT", f"/products/p-{tag}", product)[0] == 200
    assert http(api, "PUT", f"/products/p-{tag}/price", {"Price": 19.99})[0] == 200
    assert http(api, "PUT", f"/products/none-{tag}/price", {"Price": 1})[0] == 404
    assert "Price" in http(api, "PUT", f"/products/p-{tag}/price", {"Price": "cheap"})[1]["message"]
    with engine.connect() as conn:
        price = conn.execute(sa.text("SELECT price FROM product_availability WHERE product_id = :p"),
                             {"p": f"p-{tag}"}).scalar_one()  # fmt: skip
        name = conn.execute(sa.text("SELECT name FROM customers WHERE customer_id = :c"), {"c": customer})
    assert float(price) == 19.99 and name.scalar_one() == "Zoë"
