"""One realistic set of values per entity: what the tables must accept."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

SAMPLES: dict[str, list[dict[str, Any]]] = {
    "Customer": [{"CustomerId": "c-1", "Name": "Zoë O'Brien", "Email": "zoe@example.com", "Tier": "gold"}],
    "ProductDetails": [
        {"ProductId": "p-1", "Name": "Kettle", "Category": "kitchen", "Description": "1.7 l",
         "Attributes": {"colors": ["red", "black"], "watts": 2200}},
    ],
    "ProductAvailability": [{"ProductId": "p-1", "Price": Decimal("24.99"), "Stock": 12}],
    "Order": [
        {"OrderId": "o-1", "CustomerId": "c-1", "CreatedAt": "2026-11-22T07:00:00.000Z",
         "Status": "OPEN", "Total": Decimal("49.98"), "ShippingAddress": {"city": "Zürich"}},
        {"OrderId": "o-2", "CustomerId": "c-1", "CreatedAt": "2026-11-21T09:30:00.000Z",
         "Status": "SHIPPED", "Total": Decimal("5.00")},
    ],
    "OrderLine": [
        {"OrderId": "o-1", "CustomerId": "c-1", "CreatedAt": "2026-11-22T07:00:00.000Z",
         "Status": "OPEN", "LineNo": 1, "ProductId": "p-1", "Quantity": 2, "UnitPrice": Decimal("24.99")},
    ],
    "PlayerScore": [{"PlayerId": "c-1", "Score": 1200}, {"PlayerId": "c-2", "Score": 900}],
    "Follow": [{"FollowerId": "c-2", "FolloweeId": "c-1", "CreatedAt": "2026-11-20T10:00:00.000Z"}],
    "Review": [
        {"ReviewId": "r-1", "ProductId": "p-1", "CustomerId": "c-1", "CreatedAt": "2026-11-22T08:00:00.000Z",
         "Rating": 5, "Title": "Boils fast", "BodyBytes": 6000, "ChunkCount": 2, "ChunkVersion": 1},
        {"ReviewId": "r-2", "ProductId": "p-1", "CustomerId": "c-2", "CreatedAt": "2026-11-22T08:01:00.000Z",
         "Rating": 4, "Title": "Good", "BodyBytes": 9, "Body": "Good one."},
    ],
    "OrderRef": [{"OrderId": "o-1", "CustomerId": "c-1", "CreatedAt": "2026-11-22T07:00:00.000Z",
                  "Request": "9f2c"}],
    "Store": [{"Country": "CH", "Region": "ZH", "City": "Zürich", "StoreId": "s-1", "Name": "Bahnhof",
               "Address": "Bahnhofplatz 1"}],
    "Publication": [{"PublicationId": "pub-1", "Slot": 0, "Revision": 2, "Name": "Better Programming",
                     "Description": "Advice", "Editor": "c-1", "EditedAt": "2026-11-22T08:00:00.000Z"}],
    "Title": [{"PublicationId": "pub-1", "TitleId": "t-1", "Name": "Keys first",
               "PublishedAt": "2026-11-22T08:00:00.000Z"}],
    "TitleTag": [{"PublicationId": "pub-1", "TitleId": "t-1", "Tag": "dynamodb"}],
    "ReviewChunk": [
        {"ParentPK": "PRODUCT#p-1", "ParentSK": "REVIEW#r-1", "ChunkVersion": 1, "Seq": 0,
         "Data": b"x" * 1000},
    ],
    "Collection": [{"CollectionPK": "CUSTOMER#c-1", "Members": 2},
                   {"CollectionPK": "PRODUCT#p-1", "Members": 1}],
    "Sales": [{"ProductId": "p-1", "Period": "2026-11-22", "Units": 2, "Revenue": Decimal("49.98")}],
    "AggregationCursor": [{"ShardId": "shardId-0001", "Watermark": "100", "Pending": "100", "Chunks": 1,
                           "Progress": 0}],
    "AggregationJournal": [{"ShardId": "shardId-0001", "JournalId": "100", "Part": 0, "Deltas": "[]"}],
    "AggregationRange": [{"ShardId": "shardId-0001", "First": f"{90:040d}", "Last": "100"}],
    "AggregationShard": [{"ShardId": "shardId-00000001700000000000-0f1e2d3c"}],
    "AggregationChange": [{"Change": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"}],
    "CustomerSpend": [{"CustomerId": "c-1", "Period": "2026-11", "Spend": Decimal("49.98"), "Points": 49}],
}  # fmt: skip
