"""One JSON type per field type (issue 51): every route's answer, valid against the schema the OpenAPI
document gives it, whatever the values. A DECIMAL is an exact decimal string whether it is integral
(`"120"`) or not (`"12.5"`), an INTEGER a JSON integer, a JSON field's numbers the numbers stored;
every route with a body in its 2xx answer says so in the document, and each is called here."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import jsonschema
import pytest

from hybridsync.model.convert import marshal
from shop.model import CUSTOMER_SPEND, PLAYER_SCORE, SALES
from tests.handlers import http, load

pytestmark = pytest.mark.integration


@pytest.fixture
def api(handler_env):
    return load("api")


class Caller:
    """Calls routes by their document's path, and checks each 2xx answer against its schema."""

    def __init__(self, api: Any):
        self.api = api
        self.document = api.document()
        self.checked: set[tuple[str, str]] = set()

    def __call__(self, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None,
                 **ids: str) -> Any:  # fmt: skip
        concrete = re.sub(r"\{(\w+)\}", lambda m: ids[m[1]], path)
        code, answer, _ = http(self.api, method, concrete, body, **(query or {}))
        assert 200 <= code < 300, (method, concrete, code, answer)
        operation = self.document["paths"][path][method.lower()]
        content = operation["responses"][str(code)].get("content")
        assert content, f"{method} {path}: its {code} answer has a body the document does not describe"
        schema = content["application/json"]["schema"] | {"components": self.document["components"]}
        jsonschema.Draft202012Validator(schema).validate(answer)
        self.checked.add((method, path))
        return answer


def test_every_route_answers_each_field_as_its_types_one_json_type(api, stack, dynamodb):
    call, tag = Caller(api), uuid.uuid4().hex[:8]
    c, p, month = f"c-{tag}", f"p-{tag}", datetime.now(UTC).strftime("%Y-%m")
    table = stack.table_names["main"]

    # the catalogue: an integral price and a JSON field holding numbers of every kind
    assert call("PUT", "/customers/{customer_id}", {"Name": "Zoë", "Email": "z@example.com"}, customer_id=c)
    attributes = {
        "weight": Decimal("1.5"),
        "tiny": Decimal("1E-7"),
        "n": Decimal(3),
        "sizes": [Decimal("0.1"), 2],
    }
    product = {
        "Name": "Kettle",
        "Category": "kitchen",
        "Price": Decimal(120),
        "Stock": 5,
        "Attributes": attributes,
    }
    written = call("PUT", "/products/{product_id}", product, product_id=p)
    assert written["Price"] == "120" and written["Stock"] == 5
    assert written["Attributes"] == {"weight": 1.5, "tiny": 1e-7, "n": 3, "sizes": [0.1, 2]}
    assert (
        call("GET", "/products/{product_id}", product_id=p)["Price"] == "120"
    )  # a miss, read from PostgreSQL
    shown = call("GET", "/products/{product_id}", product_id=p)  # a hit, read from DynamoDB
    assert (shown["Price"], shown["Attributes"]) == ("120", written["Attributes"])
    assert (
        call("PUT", "/products/{product_id}/price", {"Price": Decimal("12.5")}, product_id=p)["Price"]
        == "12.5"
    )
    assert call("GET", "/customers/{customer_id}", customer_id=c)["Name"] == "Zoë"

    # orders: integral and fractional prices, a total of each
    lines = [{"ProductId": p, "Quantity": 2, "UnitPrice": Decimal(120)},
             {"ProductId": p, "Quantity": 1, "UnitPrice": Decimal("12.5")}]  # fmt: skip
    order = call("POST", "/orders", {"CustomerId": c, "Lines": lines})
    assert (order["Total"], [line["UnitPrice"] for line in order["Lines"]]) == ("252.5", ["120", "12.5"])
    whole = call("POST", "/orders", {"CustomerId": c, "Lines": lines[:1]})
    assert whole["Total"] == "240" and whole["Lines"][0]["Quantity"] == 2
    o = order["OrderId"]
    assert call("GET", "/orders/{order_id}", order_id=o) == order
    assert call("PATCH", "/orders/{order_id}/lines/{line_no}", {"Quantity": 3}, order_id=o, line_no="1")
    assert call("PUT", "/orders/{order_id}/status", {"Status": "SHIPPED"}, order_id=o)["Total"] == "372.5"
    assert call("GET", "/customers/{customer_id}/orders", customer_id=c)["orders"]
    assert call("GET", "/orders", query={"status": "SHIPPED", "n": "100"})["orders"]
    assert call("GET", "/orders/recent", query={"n": "100"})["orders"]
    assert call("GET", "/orders/open", query={"n": "100"})["orders"]

    # reviews, stores, publications, follows
    review = {"CustomerId": c, "Rating": 5, "Title": "Good", "Body": "Boils fast."}
    assert call("PUT", "/products/{product_id}/reviews/{review_id}", review, product_id=p, review_id="r1")
    assert (
        call("GET", "/products/{product_id}/reviews/{review_id}", product_id=p, review_id="r1")["Rating"] == 5
    )
    assert call("GET", "/customers/{customer_id}/reviews", customer_id=c)["reviews"]
    where = {"country": "CH", "region": "ZH", "city": f"Z-{tag}", "store_id": "s1"}
    assert call("PUT", "/stores/{country}/{region}/{city}/{store_id}", {"Name": "Bahnhof"}, **where)
    assert call("GET", "/stores/{country}", **where)["stores"]
    assert call("GET", "/stores/{country}/{region}", **where)["stores"]
    assert call("GET", "/stores/{country}/{region}/{city}", **where)["stores"]
    pub = {"publication_id": f"pub-{tag}"}
    assert (
        call("PUT", "/publications/{publication_id}", {"Name": "Notes", "Editor": "e-1"}, **pub)["Revision"]
        == 1
    )
    assert call("GET", "/publications/{publication_id}", **pub)
    assert call("GET", "/publications/{publication_id}/history", **pub)["revisions"]
    assert call("GET", "/publications/{publication_id}/revisions/{number}", **pub, number="1")
    title = {"TitleId": "t1", "Name": "Keys", "Tags": ["db"]}
    assert call("POST", "/publications/{publication_id}/titles", title, **pub)["Tags"] == ["db"]
    assert call("GET", "/publications/{publication_id}/titles", **pub)["titles"]
    assert call("GET", "/publications/{publication_id}/titles/{title_id}/tags", **pub, title_id="t1")["tags"]
    users = {"user_id": f"u-{tag}", "other_id": f"v-{tag}"}
    assert call("PUT", "/users/{user_id}/follows/{other_id}", **users)
    assert call("GET", "/users/{user_id}/follows", **users)["follows"]
    assert call("GET", "/users/{user_id}/followers", user_id=users["other_id"])["followers"]

    # rankings, as the aggregation and the game leave them: integral and fractional sums
    for n, spend in enumerate((Decimal(100), Decimal("12.5"))):
        values = {"CustomerId": f"{c}-{n}", "Period": month, "Spend": spend, "Points": int(spend)}
        dynamodb.put_item(TableName=table, Item=marshal(CUSTOMER_SPEND.item(values)))
        values = {"ProductId": f"{p}-{n}", "Period": month, "Revenue": spend, "Units": 10**6 + n}
        dynamodb.put_item(TableName=table, Item=marshal(SALES.item(values)))
    dynamodb.put_item(
        TableName=table, Item=marshal(PLAYER_SCORE.item({"PlayerId": c, "Score": 7, "Version": 1}))
    )
    top = call("GET", "/customers/top", query={"month": month, "n": "100"})["customers"]
    mine = {row["CustomerId"]: row for row in top if row["CustomerId"].startswith(c)}
    assert {k: v["Spend"] for k, v in mine.items()} == {f"{c}-0": "100", f"{c}-1": "12.5"}
    sellers = call("GET", "/products/top", query={"month": month, "n": "2"})["products"]
    assert [row["Revenue"] for row in sellers] == ["12.5", "100"]
    assert call("GET", "/leaderboard", query={"n": "100"})["players"]

    # and nothing was left out: every route that answers a body was called and checked here
    answering = {
        (method.upper(), path)
        for path, methods in call.document["paths"].items()
        for method, operation in methods.items()
        if any(status.startswith("2") and status != "204" for status in operation["responses"])
        and path != "/openapi.json"
    }
    assert answering - call.checked == set()


def test_a_ranked_answer_holds_the_models_fields_only(api, stack, dynamodb):
    """Never a ranking's keys (`pk`, `RankPK`) or its `Entity` tag: the fields its model declares."""
    call, tag = Caller(api), uuid.uuid4().hex[:8]
    values = {"CustomerId": f"c-{tag}", "Period": "2032-01", "Spend": Decimal(40), "Points": 40}
    dynamodb.put_item(TableName=stack.table_names["main"], Item=marshal(CUSTOMER_SPEND.item(values)))
    (row,) = call("GET", "/customers/top", query={"month": "2032-01"})["customers"]
    assert row == {"CustomerId": f"c-{tag}", "Period": "2032-01", "Spend": "40", "Points": 40}
