"""The shop's write routes: orders (DynamoDB-mastered, written back to PostgreSQL), follows, stores,
publications with their history, reviews with large bodies, and the PostgreSQL-mastered catalogue
(customers, products, prices), which reaches DynamoDB through the outbox."""

from decimal import Decimal
from typing import Any

from aws_lambda_powertools.event_handler import Response

from hybridsync import rows
from hybridsync.api import openapi
from hybridsync.api.web import (
    app,
    as_field,
    body,
    error,
    ident,
    integer,
    page,
    respond,
    route,
    shown,
    table,
)
from hybridsync.model.convert import WIDE, from_json
from hybridsync.model.errors import Invalid
from hybridsync.reads import cache
from hybridsync.runtime import settings
from hybridsync.runtime.clients import dynamodb, engine, s3
from shop import catalog, follows, orders, publications, reviews, stores
from shop.model import (
    CUSTOMER,
    FOLLOW,
    MAX_PRICE,
    ORDER,
    ORDER_LINE,
    ORDER_STATUSES,
    PRODUCT_AVAILABILITY,
    PRODUCT_DETAILS,
    PUBLICATION,
    REVIEW,
    STORE,
    TITLE,
    TITLE_TAG,
)

LINE_FIELDS = ("ProductId", "Quantity", "UnitPrice")


def _fields(
    entity: Any, names: tuple[str, ...], extra: tuple[str, ...] = (), partial: bool = False
) -> tuple[dict, dict]:
    """The request body split into the entity's named fields (checked) and the extra keys."""
    given = body()
    if not isinstance(given, dict):
        raise Invalid("body", "body must be a JSON object")
    rest = {k: given.pop(k) for k in extra if k in given}
    return from_json(entity, given, names, partial=partial), rest


def _cents(field: str, price: Decimal) -> Decimal:
    """A price is in cents, at most MAX_PRICE (the shop's domain: its sums stay exact)."""
    if price > MAX_PRICE:
        raise Invalid(field, f"{field} must be at most {MAX_PRICE}, got {price}")
    if price != price.quantize(Decimal("0.01"), context=WIDE):
        raise Invalid(field, f"{field} must be in cents (at most 2 digits after the point), got {price}")
    return price


def _exists(entity: Any, value: str) -> bool:
    """The row of this id exists (read through the cache, as the reads do)."""
    return cache.get(dynamodb(), table(), engine(), entity, {entity.sql_key[0]: value}).item is not None


def _known(entity: Any, field: str, value: str) -> None:
    """The referenced row exists: else a 400 naming it."""
    if not _exists(entity, value):
        raise Invalid(field, f"{field}: no {entity.name} {value!r}")


def _created(payload: Any, created: bool) -> Response:
    return respond(payload, status=201 if created else 200)


def _order(order: dict[str, Any]) -> dict[str, Any]:
    """An order and its lines as the API shows them (`shown`: one JSON type per field type)."""
    return shown(ORDER, order) | {"Lines": [shown(ORDER_LINE, line) for line in order["Lines"]]}


def _review(review: dict[str, Any]) -> dict[str, Any]:
    """A review, where its body is kept, and its body when read."""
    return shown(REVIEW, review) | {"Storage": review["Storage"]}


# --- orders ----------------------------------------------------------------------------------


LINE = openapi.fields(ORDER_LINE, LINE_FIELDS)
LINES = {"type": "array", "items": LINE, "minItems": 1, "maxItems": orders.MAX_LINES}
STATUS = {"Status": {"type": "string", "enum": list(ORDER_STATUSES)}}
ORDER_BODY = openapi.fields(
    ORDER, ("CustomerId", "ShippingAddress"), extra={"Lines": LINES}, required=("Lines",)
)
ORDER_SHOWN = openapi.shape(ORDER, extra={"Lines": openapi.array(openapi.shape(ORDER_LINE))})
TEXTS = openapi.array({"type": "string"})


@route(
    "POST",
    "/orders",
    body=ORDER_BODY,
    responses={201: "the order placed", 200: "placed before (same key)"},
    returns=ORDER_SHOWN,
)
def place_order() -> Response:
    """Place a customer's order of existing products; an `Idempotency-Key` header makes a retry answer the
    same order."""
    header, rest = _fields(ORDER, ("CustomerId", "ShippingAddress"), extra=("Lines",))
    lines = rest.get("Lines")
    if not isinstance(lines, list) or not lines:
        raise Invalid("Lines", "Lines must be a non-empty list of {ProductId, Quantity, UnitPrice}")
    checked = []
    for n, line in enumerate(lines):
        try:
            checked.append(from_json(ORDER_LINE, line, LINE_FIELDS))
            _cents("UnitPrice", checked[-1]["UnitPrice"])
        except Invalid as bad:
            raise Invalid(f"Lines[{n}].{bad.field}", f"Lines[{n}]: {bad}") from None
    # references that exist: the write-back would otherwise meet an order for no one
    orders.check_line_count(checked)
    _known(CUSTOMER, "CustomerId", header["CustomerId"])
    for product, n in {line["ProductId"]: n for n, line in reversed(list(enumerate(checked)))}.items():
        _known(PRODUCT_DETAILS, f"Lines[{n}].ProductId", product)
    key = app.current_event.headers.get("idempotency-key")
    order, created = orders.place_order(
        dynamodb(), table(), header["CustomerId"], checked,
        idempotency_key=key, shipping_address=header.get("ShippingAddress"),
    )  # fmt: skip
    return _created(_order(order), created)


@route("GET", "/orders/<order_id>", returns=ORDER_SHOWN)
def get_order(order_id: str) -> Response:
    """An order and its lines."""
    return respond(_order(orders.get_order(dynamodb(), table(), ident("order id", order_id))))


@route(
    "PATCH",
    "/orders/<order_id>/lines/<line_no>",
    body=openapi.fields(ORDER_LINE, ("Quantity",)),
    path={"line_no": {"type": "integer", "minimum": 1, "maximum": orders.MAX_LINES}},
    returns=ORDER_SHOWN,
)
def edit_line(order_id: str, line_no: str) -> Response:
    """Change one line's quantity."""
    number = integer("line number", line_no, 1, orders.MAX_LINES)
    changes, _ = _fields(ORDER_LINE, ("Quantity",))
    return respond(_order(orders.edit_line(dynamodb(), table(), ident("order id", order_id), number,
                                           changes["Quantity"])))  # fmt: skip


@route(
    "PUT",
    "/orders/<order_id>/status",
    body=openapi.fields(ORDER, ("Status",), extra=STATUS),
    returns=ORDER_SHOWN,
)
def set_status(order_id: str) -> Response:
    """Move an order and its lines to a status: an open order ships or is cancelled, a shipped one
    reopens; any other move is a 409."""
    changes, _ = _fields(ORDER, ("Status",))
    return respond(
        _order(orders.set_status(dynamodb(), table(), ident("order id", order_id), changes["Status"]))
    )


@route("DELETE", "/orders/<order_id>")
def delete_order(order_id: str) -> Response:
    """Delete an order and its lines."""
    orders.delete_order(dynamodb(), table(), ident("order id", order_id))
    return respond(None, status=204)


# --- follows (adjacency list) ----------------------------------------------------------------


@route(
    "PUT",
    "/users/<user_id>/follows/<other_id>",
    responses={201: "followed", 200: "already followed"},
    returns=openapi.shape(FOLLOW),
)
def follow(user_id: str, other_id: str) -> Response:
    """Follow another user."""
    edge, created = follows.follow(dynamodb(), table(), ident("user id", user_id),
                                   ident("followed id", other_id))  # fmt: skip
    return _created(shown(FOLLOW, edge), created)


@route("DELETE", "/users/<user_id>/follows/<other_id>")
def unfollow(user_id: str, other_id: str) -> Response:
    """Stop following a user."""
    follows.unfollow(dynamodb(), table(), ident("user id", user_id), ident("followed id", other_id))
    return respond(None, status=204)


@route(
    "GET",
    "/users/<user_id>/follows",
    query=("limit", "cursor"),
    returns=openapi.listing(follows=TEXTS, cursor=openapi.CURSOR),
)
def following(user_id: str) -> Response:
    """Whom a user follows, a page at a time."""
    ids, cursor = follows.following(dynamodb(), table(), ident("user id", user_id), *page())
    return respond({"follows": ids, "cursor": cursor})


@route(
    "GET",
    "/users/<user_id>/followers",
    query=("limit", "cursor"),
    returns=openapi.listing(followers=TEXTS, cursor=openapi.CURSOR),
)
def followers(user_id: str) -> Response:
    """Who follows a user, a page at a time."""
    ids, cursor = follows.followers(dynamodb(), table(), ident("user id", user_id), *page())
    return respond({"followers": ids, "cursor": cursor})


# --- stores (hierarchical keys) --------------------------------------------------------------

STORES = openapi.listing(stores=openapi.array(openapi.shape(STORE)))
# each key level's path parameter as its field declares it (a country of at most 64 characters)
LEVELS = {
    parameter: openapi.field_schema(STORE.field(name)) | {"minLength": 1}
    for parameter, name in (
        ("country", "Country"),
        ("region", "Region"),
        ("city", "City"),
        ("store_id", "StoreId"),
    )
}


@route(
    "PUT",
    "/stores/<country>/<region>/<city>/<store_id>",
    body=openapi.fields(STORE, ("Name", "Address")),
    path=LEVELS,
    returns=openapi.shape(STORE),
)
def put_store(country: str, region: str, city: str, store_id: str) -> Response:
    """Create or replace a store, keyed by country, region, city and id."""
    where = {"Country": country, "Region": region, "City": city, "StoreId": store_id}
    values, _ = _fields(STORE, ("Name", "Address"))
    return respond(
        shown(STORE, stores.put_store(dynamodb(), table(), from_json(STORE, where, tuple(where)) | values))
    )


@route("GET", "/stores/<country>", path=LEVELS, returns=STORES)
def stores_of_country(country: str) -> Response:
    """Every store of a country."""
    found = stores.stores(dynamodb(), table(), as_field(STORE, "Country", country))
    return respond({"stores": [shown(STORE, s) for s in found]})


@route("GET", "/stores/<country>/<region>", path=LEVELS, returns=STORES)
def stores_of_region(country: str, region: str) -> Response:
    """Every store of a region."""
    where = (as_field(STORE, "Country", country), as_field(STORE, "Region", region))
    return respond({"stores": [shown(STORE, s) for s in stores.stores(dynamodb(), table(), *where)]})


@route("GET", "/stores/<country>/<region>/<city>", path=LEVELS, returns=STORES)
def stores_of_city(country: str, region: str, city: str) -> Response:
    """Every store of a city."""
    where = (
        as_field(STORE, "Country", country),
        as_field(STORE, "Region", region),
        as_field(STORE, "City", city),
    )
    return respond({"stores": [shown(STORE, s) for s in stores.stores(dynamodb(), table(), *where)]})


# --- publications: one table for relational data, with version history ----------------------

EXPECTED = {
    "type": "integer",
    "minimum": 0,
    "description": "the revision the edit expects the publication at (0: not created yet); another is a 409",
}
TAG = openapi.field_schema(TITLE_TAG.field("Tag")) | {"minLength": 1}


@route("PUT", "/publications/<publication_id>", body=openapi.fields(
    PUBLICATION, (*publications.EDITABLE, "Editor"), partial=True, required=("Editor",),
    extra={"ExpectedRevision": EXPECTED})
    | {"examples": [{"Name": "Field notes", "Editor": "editor-1"}]},
    returns=openapi.shape(PUBLICATION))  # fmt: skip
def edit_publication(publication_id: str) -> Response:
    """Edit a publication, keeping every revision (the first edit creates it, and gives its `Name`);
    with `ExpectedRevision`, a 409 if another edit came first (0: if it exists already)."""
    changes, rest = _fields(
        PUBLICATION, (*publications.EDITABLE, "Editor"), extra=("ExpectedRevision",), partial=True
    )
    editor = changes.pop("Editor", None)
    if editor is None:
        raise Invalid("Editor", "Editor is required")
    expected = rest.get("ExpectedRevision")
    integral = isinstance(expected, Decimal) and expected == expected.to_integral_value()
    if expected is not None and not (integral and expected >= 0):  # as EXPECTED says
        raise Invalid(
            "ExpectedRevision", f"ExpectedRevision must be an integer of at least 0, got {expected!r}"
        )
    edited = publications.edit(dynamodb(), table(), ident("publication id", publication_id), changes, editor,
                               None if expected is None else int(expected))  # fmt: skip
    return respond(shown(PUBLICATION, edited))


@route("GET", "/publications/<publication_id>", returns=openapi.shape(PUBLICATION))
def publication(publication_id: str) -> Response:
    """A publication's newest revision."""
    found = publications.latest(dynamodb(), table(), ident("publication id", publication_id))
    return respond(shown(PUBLICATION, found))


@route(
    "GET",
    "/publications/<publication_id>/history",
    query=("limit", "cursor"),
    returns=openapi.listing(revisions=openapi.array(openapi.shape(PUBLICATION)), cursor=openapi.CURSOR),
)
def publication_history(publication_id: str) -> Response:
    """A publication's revisions, newest first, a page at a time."""
    revisions, cursor = publications.history(dynamodb(), table(), ident("publication id", publication_id),
                                             *page())  # fmt: skip
    return respond({"revisions": [shown(PUBLICATION, r) for r in revisions], "cursor": cursor})


@route(
    "GET",
    "/publications/<publication_id>/revisions/<number>",
    path={"number": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}},
    returns=openapi.shape(PUBLICATION),
)
def publication_revision(publication_id: str, number: str) -> Response:
    """One revision of a publication (1 is the first)."""
    revision = integer("revision", number, 1, 2**63 - 1)
    found = publications.revision(dynamodb(), table(), ident("publication id", publication_id), revision)
    return respond(shown(PUBLICATION, found))


@route("POST", "/publications/<publication_id>/titles", body=openapi.fields(
    TITLE, ("TitleId", "Name"), extra={"Tags": {"type": "array", "items": {"type": "string"}}}),
    responses={201: "the title added"}, returns=openapi.shape(TITLE, extra={"Tags": TEXTS}))  # fmt: skip
def add_title(publication_id: str) -> Response:
    """Add a title to a publication, with its tags."""
    values, rest = _fields(TITLE, ("TitleId", "Name"), extra=("Tags",))
    tags = rest.get("Tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise Invalid("Tags", "Tags must be a list of strings")
    for n, tag in enumerate(tags):  # checked as the edges' Tag field declares
        try:
            from_json(TITLE_TAG, {"Tag": tag}, ("Tag",))
        except Invalid as bad:
            raise Invalid(f"Tags[{n}]", f"Tags[{n}]: {bad}") from None
    title = publications.add_title(dynamodb(), table(), ident("publication id", publication_id),
                                   values["TitleId"], values["Name"], tuple(tags))  # fmt: skip
    return respond(shown(TITLE, title) | {"Tags": title["Tags"]}, status=201)


@route(
    "GET",
    "/publications/<publication_id>/titles",
    query=(("tag", TAG),),
    returns=openapi.listing(titles=openapi.array(openapi.shape(TITLE))),
)
def titles(publication_id: str) -> Response:
    """A publication's titles, or those with a tag."""
    tag = app.current_event.get_query_string_value("tag", None)
    if tag == "":
        raise Invalid("tag", "tag must not be empty: leave it out for every title")
    tag = None if tag is None else as_field(TITLE_TAG, "Tag", tag, "tag")
    found = publications.titles(dynamodb(), table(), ident("publication id", publication_id), tag)
    return respond({"titles": [shown(TITLE, t) for t in found]})


@route("GET", "/publications/<publication_id>/titles/<title_id>/tags", returns=openapi.listing(tags=TEXTS))
def title_tags(publication_id: str, title_id: str) -> Response:
    """A title's tags."""
    return respond({"tags": publications.tags(dynamodb(), table(), ident("publication id", publication_id),
                                              ident("title id", title_id))})  # fmt: skip


# --- reviews (large items) -------------------------------------------------------------------


def _place() -> reviews.Place:
    return reviews.Place(settings.table_name("chunks"), s3(), settings.bucket_name("bodies"))


REVIEW_SHOWN = openapi.shape(
    REVIEW, extra={"Storage": {"type": "string", "description": "where its body is kept"}}
)
REVIEW_BODY = openapi.fields(
    REVIEW,
    ("CustomerId", "Rating", "Title"),
    extra={"Body": {"type": "string", "minLength": 1}},
    required=("Body",),
)


@route("PUT", "/products/<product_id>/reviews/<review_id>", body=REVIEW_BODY, returns=REVIEW_SHOWN)
def put_review(product_id: str, review_id: str) -> Response:
    """Create or replace a review and its body (a large body is stored apart) of an existing product by an
    existing customer; answers the review without its body."""
    values, rest = _fields(REVIEW, ("CustomerId", "Rating", "Title"), extra=("Body",))
    text = rest.get("Body")
    if not isinstance(text, str) or not text:
        raise Invalid("Body", "Body must be a non-empty string")
    key = {"ProductId": ident("product id", product_id), "ReviewId": ident("review id", review_id)}
    # what the review refers to exists, as for an order: a review of no product is a 404, by no one a 400
    if not _exists(PRODUCT_DETAILS, key["ProductId"]):
        return error(404, f"no product {product_id!r}")
    _known(CUSTOMER, "CustomerId", values["CustomerId"])
    return respond(_review(reviews.put_review(dynamodb(), table(), _place(), key | values, text)))


@route("GET", "/products/<product_id>/reviews/<review_id>", returns=REVIEW_SHOWN)
def get_review(product_id: str, review_id: str) -> Response:
    """A review and its body."""
    return respond(_review(reviews.get_review(dynamodb(), table(), _place(), ident("product id", product_id),
                                              ident("review id", review_id))))  # fmt: skip


@route("DELETE", "/products/<product_id>/reviews/<review_id>")
def delete_review(product_id: str, review_id: str) -> Response:
    """Delete a review and its body."""
    reviews.delete_review(dynamodb(), table(), _place(), ident("product id", product_id),
                          ident("review id", review_id))  # fmt: skip
    return respond(None, status=204)


# --- the catalogue, mastered in PostgreSQL ---------------------------------------------------

CUSTOMER_FIELDS = ("Name", "Email", "Tier")
DETAIL_FIELDS = ("Name", "Category", "Description", "Attributes")


@route(
    "PUT",
    "/customers/<customer_id>",
    body=openapi.fields(CUSTOMER, CUSTOMER_FIELDS),
    returns=openapi.shape(CUSTOMER),
)
def put_customer(customer_id: str) -> Response:
    """Create or replace a customer in PostgreSQL, its master (its DynamoDB view follows)."""
    values, _ = _fields(CUSTOMER, CUSTOMER_FIELDS)
    values["CustomerId"] = ident("customer id", customer_id)
    with engine().begin() as conn:
        version = rows.upsert(conn, CUSTOMER, values)
    return respond(shown(CUSTOMER, values | {"Version": version}))


AVAILABILITY = openapi.fields(PRODUCT_AVAILABILITY, ("Price", "Stock"))["properties"]


@route("PUT", "/products/<product_id>", body=openapi.fields(
    PRODUCT_DETAILS, DETAIL_FIELDS, extra=AVAILABILITY, required=("Price", "Stock")),
    returns=openapi.shape(PRODUCT_DETAILS, extra=openapi.shown_properties(PRODUCT_AVAILABILITY)))  # fmt: skip
def put_product(product_id: str) -> Response:
    """Create or replace a product's details, price and stock in PostgreSQL, their master."""
    details, rest = _fields(PRODUCT_DETAILS, DETAIL_FIELDS, extra=("Price", "Stock"))
    availability = from_json(PRODUCT_AVAILABILITY, rest, ("Price", "Stock"))
    _cents("Price", availability["Price"])
    key = {"ProductId": ident("product id", product_id)}
    catalog.put_product(engine(), key | details, key | availability)
    return respond(shown(PRODUCT_DETAILS, key | details) | shown(PRODUCT_AVAILABILITY, key | availability))


@route(
    "PUT",
    "/products/<product_id>/price",
    body=openapi.fields(PRODUCT_AVAILABILITY, ("Price",)),
    returns=openapi.shape(PRODUCT_AVAILABILITY),
)
def set_price(product_id: str) -> Response:
    """Change a product's price in PostgreSQL, its master."""
    given, _ = _fields(PRODUCT_AVAILABILITY, ("Price",))
    _cents("Price", given["Price"])
    version = catalog.set_price(engine(), ident("product id", product_id), given["Price"])
    return respond(
        shown(PRODUCT_AVAILABILITY, {"ProductId": product_id, "Price": given["Price"], "Version": version})
    )
