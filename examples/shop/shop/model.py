"""The shop's model, declared with hybridsync's language: its tables, entities, aggregates and time
series. Everything the engine does for the shop (stacks, functions, SQL schema and migrations,
stream filters, keys) renders from here. `[tool.hybridsync] model = "shop.model:MODEL"`."""

from __future__ import annotations

from hybridsync.model.declare import (
    ID_LENGTH,
    Aggregate,
    Bodies,
    Copy,
    Entity,
    Field,
    FieldType,
    Hierarchy,
    Index,
    KeyAttribute,
    Model,
    Names,
    Period,
    Projection,
    Rank,
    Sharded,
    Side,
    Source,
    StreamView,
    Sum,
    Table,
    Template,
    TimeSeries,
    When,
    Where,
    body_fields,
    chunks_of,
)

NAMES = Names()  # the engine's defaults: Entity, Version, Origin ("sql")
ENTITY, VERSION, ORIGIN, ORIGIN_SQL = NAMES.entity, NAMES.version, NAMES.origin, NAMES.origin_sql
EXPIRES_AT = "ExpiresAt"  # TTL (epoch seconds) of cache items

# Shard counts of the write-sharded GSI partitions (pattern 7), calculated from an attribute's hash:
# a range read scatters over all of them, a read of one item computes its shard.
ORDER_TIME_SHARDS = 8
OPEN_ORDER_SHARDS = 4
STATUS_SHARDS = 4
RANKING_SHARDS = 4
LEADERBOARD_SHARDS = 8


def _s(name: str) -> KeyAttribute:
    return KeyAttribute(name, "S")


def _n(name: str) -> KeyAttribute:
    return KeyAttribute(name, "N")


ORDER_SUMMARY = (ENTITY, "OrderId", "CustomerId", "Status", "Total", "CreatedAt")
# what the Inverted index's readers use: follow edges, a customer's reviews (never their bodies),
# a title's tags and a customer's order headers
INVERTED_ATTRIBUTES = tuple(dict.fromkeys((
    *ORDER_SUMMARY, VERSION, "FollowerId", "FolloweeId", "ReviewId", "ProductId", "Rating", "Title",
    "PublicationId", "TitleId", "Tag",
)))  # fmt: skip

MAIN = Table(
    name="main",
    partition=_s("PK"),
    sort=_s("SK"),
    stream=StreamView.NEW_AND_OLD_IMAGES,
    ttl_attribute=EXPIRES_AT,
    distinct_index="DistinctKeys",
    purpose="every entity, as item collections keyed Entity#Value",
    indexes=(
        Index(
            "OrdersByTime",
            _s("TimeShard"),
            _s("CreatedAt"),
            Projection.INCLUDE,
            "all orders by time across customers (last 24 h / 7 d, newest N) in one Query per "
            "shard; the constant partition is write-sharded by order id (patterns 5, 7)",
            non_key_attributes=ORDER_SUMMARY[:-1],
        ),
        Index(
            "OpenOrders",
            _s("OpenShard"),
            _s("OrderOpenDate"),
            Projection.INCLUDE,
            "sparse: only open orders carry OrderOpenDate, so the index lists exactly the open "
            "ones by open date; shards 0..N allow a time-range scatter read (patterns 8, 9)",
            non_key_attributes=ORDER_SUMMARY,
        ),
        Index(
            "OrdersByStatus",
            _s("StatusShard"),
            _s("CreatedAt"),
            Projection.INCLUDE,
            "sparse complement of OpenOrders: every order no longer open, partitioned by status "
            "(SHIPPED#0..3, CANCELLED#0..3), so any status in a time range is one Query per shard, "
            "never a scan; an order is in exactly one of the two (pattern 8)",
            non_key_attributes=ORDER_SUMMARY[:-1],
        ),
        Index(
            "Rankings",
            _s("RankPK"),
            _n("RankSK"),
            Projection.ALL,
            "overloaded and sparse: top sellers per day/month, top customers per month and the "
            "game leaderboard; only aggregates and scores carry it; write-sharded partitions, "
            "top N = one descending Query per shard, merged (patterns 6, 8, 10, 11)",
        ),
        Index(
            "Inverted",
            _s("GSI1PK"),
            _s("GSI1SK"),
            Projection.INCLUDE,
            "overloaded inverted edges: who follows A (PK/SK of follow edges swapped), a "
            "customer's reviews (the product -> review edge read from the author's side), a "
            "title's tags (the tag -> title edge read from the title's side) and a customer's "
            "order headers without their lines (patterns 2, 4, 10, 19); projects what those "
            "readers use, never a review's body",
            non_key_attributes=INVERTED_ATTRIBUTES,
        ),
        Index(
            "DistinctKeys",
            _s("StaticPK"),
            None,
            Projection.KEYS_ONLY,
            "sparse KEYS_ONLY: one #static item per customer with orders, per follower and per "
            "publication, so listing those partition keys reads a tiny index instead of scanning "
            "the table (pattern 20)",
        ),
    ),
)

CHUNKS = Table(
    name="chunks",
    partition=_s("ChunkKey"),
    purpose="chunks of large attributes, simple key <parentPK>#<parentSK>#<version>#<seq> (pattern 18)",
)

CUSTOMER = Entity(
    "Customer",
    MAIN,
    Side.POSTGRESQL,
    fields=(
        Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("Email", FieldType.STRING, max_length=320),
        Field("Tier", FieldType.STRING, required=False),
    ),
    keys={"PK": Template("CUSTOMER#{CustomerId}"), "SK": Template("PROFILE")},
    sql_table="customers",
    sql_key=("CustomerId",),
    description="customer profile, cached from PostgreSQL on read",
)

PRODUCT_DETAILS = Entity(
    "ProductDetails",
    MAIN,
    Side.POSTGRESQL,
    fields=(
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("Category", FieldType.STRING),
        Field("Description", FieldType.STRING, required=False),
        Field("Attributes", FieldType.JSON, required=False),
    ),
    keys={"PK": Template("PRODUCT#{ProductId}"), "SK": Template("DETAILS")},
    sql_table="products",
    sql_key=("ProductId",),
    description="large, static catalog part of a product (pattern 16)",
)

# The shop's domain: prices in cents up to a million, quantities up to 10,000, so every sum the
# aggregates keep stays exact within DynamoDB's 38 digits. An order line's price is checked by its
# route: a line written past it anyway (tests do) shows the engine's own guard on those sums.
MAX_PRICE, MAX_QUANTITY = 1_000_000, 10_000

PRODUCT_AVAILABILITY = Entity(
    "ProductAvailability",
    MAIN,
    Side.POSTGRESQL,
    fields=(
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Price", FieldType.DECIMAL, min=0, max=MAX_PRICE),
        Field("Stock", FieldType.INTEGER, min=0, max=10**9),
    ),
    keys={"PK": Template("PRODUCT#{ProductId}"), "SK": Template("AVAILABILITY")},
    sql_table="product_availability",
    sql_key=("ProductId",),
    description="small, fast-changing price and stock: a price change rewrites only this (pattern 16)",
)

_ORDER_FIELDS = (
    Field("OrderId", FieldType.STRING, max_length=ID_LENGTH),
    Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
    Field("CreatedAt", FieldType.TIMESTAMP),
    Field("Status", FieldType.STRING, max_length=32),
)
OPEN, SHIPPED, CANCELLED = "OPEN", "SHIPPED", "CANCELLED"
ORDER_STATUSES = (OPEN, SHIPPED, CANCELLED)
OPEN_STATUSES = (OPEN,)
CLOSED_STATUSES = tuple(s for s in ORDER_STATUSES if s not in OPEN_STATUSES)

ORDER = Entity(
    "Order",
    MAIN,
    Side.DYNAMODB,
    fields=(
        *_ORDER_FIELDS,
        Field("Total", FieldType.DECIMAL),
        Field("ShippingAddress", FieldType.JSON, required=False),
    ),
    keys={
        "PK": Template("CUSTOMER#{CustomerId}"),
        "SK": Template("ORDER#{CreatedAt}#{OrderId}"),
        "TimeShard": Sharded("ORDERS", "OrderId", ORDER_TIME_SHARDS),
        "OpenShard": When("Status", OPEN_STATUSES, Sharded("OPEN", "OrderId", OPEN_ORDER_SHARDS)),
        "OrderOpenDate": When("Status", OPEN_STATUSES, Copy("CreatedAt")),
        "StatusShard": When("Status", CLOSED_STATUSES, Sharded("{Status}", "OrderId", STATUS_SHARDS)),
        # the headers alone, in the customer's partition of the Inverted index: a date range
        # reads no line
        "GSI1PK": Template("CUSTOMER#{CustomerId}"),
        "GSI1SK": Template("ORDER#{CreatedAt}#{OrderId}"),
    },
    sql_table="orders",
    sql_key=("OrderId",),
    description="order header in the customer's collection: a date range is one Query (pattern 2)",
)

ORDER_LINE = Entity(
    "OrderLine",
    MAIN,
    Side.DYNAMODB,
    fields=(
        *_ORDER_FIELDS,
        Field("LineNo", FieldType.INTEGER),
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Quantity", FieldType.INTEGER, min=1, max=MAX_QUANTITY),
        Field("UnitPrice", FieldType.DECIMAL, min=0),  # at most MAX_PRICE, in cents: the route checks
    ),
    keys={
        "PK": Template("CUSTOMER#{CustomerId}"),
        "SK": Template("ORDER#{CreatedAt}#{OrderId}#LINE#{LineNo:04d}"),
    },
    sql_table="order_lines",
    sql_key=("OrderId", "LineNo"),
    description="order line next to its order: begins_with(SK, ORDER#<time>#<id>) reads both",
)

PLAYER_SCORE = Entity(
    "PlayerScore",
    MAIN,
    Side.DYNAMODB,
    fields=(Field("PlayerId", FieldType.STRING, max_length=ID_LENGTH), Field("Score", FieldType.INTEGER)),
    keys={
        "PK": Template("PLAYER#{PlayerId}"),
        "SK": Template("SCORE"),
        "RankPK": Sharded("LEADERBOARD", "PlayerId", LEADERBOARD_SHARDS),
        "RankSK": Copy("Score"),
    },
    sql_table="player_scores",
    sql_key=("PlayerId",),
    description="loyalty game score; the score is a GSI sort key, never a primary key (pattern 6)",
)

FOLLOW = Entity(
    "Follow",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("FollowerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("FolloweeId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CreatedAt", FieldType.TIMESTAMP),
    ),
    keys={
        "PK": Template("USER#{FollowerId}"),
        "SK": Template("FOLLOWS#{FolloweeId}"),
        "GSI1PK": Template("FOLLOWS#{FolloweeId}"),
        "GSI1SK": Template("USER#{FollowerId}"),
    },
    sql_table="follows",
    sql_key=("FollowerId", "FolloweeId"),
    description="adjacency list edge; the Inverted GSI answers who follows A (pattern 19)",
)

ORDER_REF = Entity(
    "OrderRef",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("OrderId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CreatedAt", FieldType.TIMESTAMP),
        Field("Request", FieldType.STRING),  # fingerprint of the request that placed the order
    ),
    keys={"PK": Template("ORDER#{OrderId}"), "SK": Template("REF")},
    description="an order's key by its id; created with the order under attribute_not_exists, so a "
    "retried placement finds the first one instead of placing a second",
)

STORE = Entity(
    "Store",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("Country", FieldType.STRING, max_length=64),
        Field("Region", FieldType.STRING, max_length=ID_LENGTH),
        Field("City", FieldType.STRING, max_length=ID_LENGTH),
        Field("StoreId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("Address", FieldType.STRING, required=False),
    ),
    keys={"PK": Hierarchy(("Country",), "STORES"), "SK": Hierarchy(("Region", "City", "StoreId"))},
    description="a store under country#region#city#id: every level is one begins_with Query (pattern 3)",
)

PUBLICATION = Entity(
    "Publication",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("PublicationId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Slot", FieldType.INTEGER),  # 0: the latest revision; k >= 1: revision k, kept
        Field("Revision", FieldType.INTEGER),
        Field("Name", FieldType.STRING),
        Field("Description", FieldType.STRING, required=False),
        Field("Editor", FieldType.STRING, max_length=ID_LENGTH),
        Field("EditedAt", FieldType.TIMESTAMP),
    ),
    keys={"PK": Template("PUBLICATION#{PublicationId}"), "SK": Template("METADATA#v{Slot:06d}")},
    description="a publication's metadata with its history: v0 the latest, v1..vN every revision "
    "(patterns 4, 15)",
)

TITLE = Entity(
    "Title",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("PublicationId", FieldType.STRING, max_length=ID_LENGTH),
        Field("TitleId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("PublishedAt", FieldType.TIMESTAMP),
    ),
    keys={"PK": Template("PUBLICATION#{PublicationId}"), "SK": Template("TITLE#{TitleId}")},
    description="a title in its publication's collection: the titles are one Query (pattern 4)",
)

TITLE_TAG = Entity(
    "TitleTag",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("PublicationId", FieldType.STRING, max_length=ID_LENGTH),
        Field("TitleId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Tag", FieldType.STRING, max_length=64),
    ),
    keys={
        "PK": Template("PUBLICATION#{PublicationId}"),
        "SK": Template("TAG#{Tag}#{TitleId}"),
        "GSI1PK": Template("TITLE#{PublicationId}#{TitleId}"),
        "GSI1SK": Template("TAG#{Tag}"),
    },
    description="a title <-> tag edge: the titles with a tag by Query, a title's tags by the "
    "Inverted GSI (patterns 4, 10)",
)

REVIEW = Entity(
    "Review",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("ReviewId", FieldType.STRING, max_length=ID_LENGTH),
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CreatedAt", FieldType.TIMESTAMP),
        Field("Rating", FieldType.INTEGER, min=1, max=5),
        Field("Title", FieldType.STRING),
        *body_fields(),  # the body, kept by size: inline, gzip, chunked or in S3 (pattern 18)
    ),
    keys={
        "PK": Template("PRODUCT#{ProductId}"),
        "SK": Template("REVIEW#{ReviewId}"),
        "GSI1PK": Template("CUSTOMER#{CustomerId}"),
        "GSI1SK": Template("REVIEW#{CreatedAt}"),
    },
    description="a product review; its body inline, gzip-compressed, chunked or in S3 by size (pattern 18)",
)

REVIEW_CHUNK = chunks_of("ReviewChunk", CHUNKS)  # chunks of review bodies
REVIEW_BODIES = Bodies(REVIEW, REVIEW_CHUNK, object_prefix="reviews/")

COUNTED = Where("Status", none_of=(CANCELLED,))  # a cancelled line contributes nothing

SALES_BY_PRODUCT = Aggregate(
    "Sales",
    sources=(Source(ORDER_LINE),),
    where=COUNTED,
    group_by=("ProductId",),
    time="CreatedAt",
    periods=(Period.DAY, Period.MONTH),
    measures=(Sum("Units", of="Quantity"), Sum("Revenue", of=("Quantity", "UnitPrice"))),
    partition="PRODUCT#{ProductId}",
    sort="SALES#{Period}",
    rank=Rank("Units", index="Rankings", prefix="SALES#{Period}", shards=RANKING_SHARDS),
    description="units and revenue of a product in a day or month (pattern 11)",
)

SPEND_BY_CUSTOMER = Aggregate(
    "CustomerSpend",
    sources=(Source(ORDER_LINE),),
    where=COUNTED,
    group_by=("CustomerId",),
    time="CreatedAt",
    periods=(Period.MONTH,),
    # loyalty points: one per whole currency unit of a line (per line, so deltas add up)
    measures=(
        Sum("Points", of=("Quantity", "UnitPrice"), whole=True),
        Sum("Spend", of=("Quantity", "UnitPrice")),
    ),
    partition="CUSTOMER#{CustomerId}",
    sort="SPEND#{Period}",
    rank=Rank("Points", index="Rankings", prefix="SPEND#{Period}", shards=RANKING_SHARDS),
    description="spend and loyalty points of a customer in a month (top customers)",
)

SALES, CUSTOMER_SPEND = SALES_BY_PRODUCT.entity, SPEND_BY_CUSTOMER.entity

EVENTS = Table(
    name="events",
    partition=_s("PK"),
    sort=_s("SK"),
    purpose="one table per day of device events (pattern 22); created ahead, cooled, archived, dropped",
)

EVENT = Entity(
    "Event",
    EVENTS,
    Side.DYNAMODB,
    fields=(
        Field("Source", FieldType.STRING, max_length=ID_LENGTH),  # a device, a service, a user
        Field("At", FieldType.STRING),  # ISO-8601 UTC, ms
        Field("EventId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Kind", FieldType.STRING),
        Field("Data", FieldType.JSON, required=False),
    ),
    keys={"PK": Template("SOURCE#{Source}"), "SK": Template("{At}#{EventId}")},
    description="an event of a source at a time; a source's events of a day are one Query",
    versioned=False,
)

EVENT_SERIES = TimeSeries(EVENT, Period.DAY, time_attribute="At")

MODEL = Model(
    names=NAMES,
    aggregates=(SALES_BY_PRODUCT, SPEND_BY_CUSTOMER),
    bodies=(REVIEW_BODIES,),
    time_series=(EVENT_SERIES,),
    tables=(MAIN, CHUNKS),
    entities=(
        CUSTOMER,
        PRODUCT_DETAILS,
        PRODUCT_AVAILABILITY,
        ORDER,
        ORDER_LINE,
        PLAYER_SCORE,
        FOLLOW,
        ORDER_REF,
        STORE,
        PUBLICATION,
        TITLE,
        TITLE_TAG,
        REVIEW,
        REVIEW_CHUNK,
    ),
)

COLLECTION = MODEL.collection(MAIN)  # the engine's #static markers of the main table (pattern 20)
_BOOKKEEPING = MODEL.bookkeeping(MAIN)
AGGREGATION_CURSOR, AGGREGATION_JOURNAL, AGGREGATION_RANGE = (
    _BOOKKEEPING["cursor"],
    _BOOKKEEPING["journal"],
    _BOOKKEEPING["range"],
)
